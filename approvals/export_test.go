package approvals

// InboxSQL is the inbox's query, for the test that reads its plan.
const InboxSQL = inboxSQL

// MineSQL is the query of a person's own waiting requests, for the same test.
const MineSQL = mineSQL
