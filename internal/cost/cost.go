// Package cost counts what a workflow run costs from its history: its
// events, and its billable actions as Temporal Cloud counts them
// (docs.temporal.io/cloud/actions): the start; each Update accepted; each
// signal; each timer started; each activity started or retried; each
// search-attribute upsert except the TemporalChangeVersion one GetVersion
// adds; and every marker a workflow task records (side effects, local
// activities, versions) as one action for that task, however many there are.
package cost

import (
	"context"
	"fmt"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// Cost is what one run cost.
type Cost struct {
	// Events is the length of its history.
	Events int `json:"events"`
	// Actions are its billable actions.
	Actions int `json:"actions"`
}

// changeVersion is the search attribute GetVersion upserts; Temporal Cloud
// does not bill its upsert.
const changeVersion = "TemporalChangeVersion"

// Count counts a history.
func Count(events []*historypb.HistoryEvent) Cost {
	c := Cost{Events: len(events)}
	markedTasks := map[int64]bool{}
	for _, ev := range events {
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enums.EVENT_TYPE_TIMER_STARTED:
			c.Actions++
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// Each attempt is started once; the attempt number says how many
			// came before (an activity retried with its last failure kept
			// records only the last start).
			c.Actions += int(max(1, ev.GetActivityTaskStartedEventAttributes().GetAttempt()))
		case enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			fields := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, ok := fields[changeVersion]; !ok || len(fields) > 1 {
				c.Actions++
			}
		case enums.EVENT_TYPE_MARKER_RECORDED:
			markedTasks[ev.GetMarkerRecordedEventAttributes().GetWorkflowTaskCompletedEventId()] = true
		}
	}
	c.Actions += len(markedTasks)
	return c
}

// Of fetches a run's history and counts it.
func Of(ctx context.Context, c client.Client, workflowID, runID string) (Cost, error) {
	iter := c.GetWorkflowHistory(ctx, workflowID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return Cost{}, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		events = append(events, ev)
	}
	return Count(events), nil
}
