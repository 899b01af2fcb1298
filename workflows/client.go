package workflows

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// Start starts the call's workflow, or attaches to it when the same
// conversation and tool-call IDs were started before: a duplicate start
// never makes a second run, not even after the first one ended.
func Start(ctx context.Context, c client.Client, taskQueue string, in ToolCallInput) (client.WorkflowRun, error) {
	if in.ToolCallID == "" || in.Session.ConversationID == "" {
		return nil, errors.New("toolCallId and session.conversationId are required: together they name the call and its idempotency key")
	}
	id := WorkflowID(in.Session.ConversationID, in.ToolCallID)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, WorkflowType, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return c.GetWorkflow(ctx, id, ""), nil
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	return run, nil
}
