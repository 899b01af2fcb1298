package approvals

// InboxSQL is the inbox's query, for the test that reads its plan.
const InboxSQL = inboxSQL
