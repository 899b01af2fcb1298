package cost

import (
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

func load(t *testing.T, name string) []*historypb.HistoryEvent {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "workflows", "testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h.Events
}

// The recorded histories of generation 8, counted by hand from their
// events against the documented rules.
func TestCountsRecordedHistories(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Cost
	}{
		// start; the first task's markers (version, policy, admission, call);
		// the final upsert. The TemporalChangeVersion upsert is free.
		{"allowed_read.g8.json", Cost{Events: 11, Actions: 3}},
		// start, Update, three tasks with markers, Preview, Project, CallTool,
		// two timers, the signal, three upserts (two more are TemporalChangeVersion's).
		{"transfer_approved_executed.g8.json", Cost{Events: 47, Actions: 15}},
	} {
		if got := Count(load(t, tc.file)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.file, got, tc.want)
		}
	}
}

func event(typ enums.EventType, attrs func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
	ev := &historypb.HistoryEvent{EventType: typ}
	if attrs != nil {
		attrs(ev)
	}
	return ev
}

func marker(task int64) *historypb.HistoryEvent {
	return event(enums.EVENT_TYPE_MARKER_RECORDED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{WorkflowTaskCompletedEventId: task}}
	})
}

func TestRules(t *testing.T) {
	retried := event(enums.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(ev *historypb.HistoryEvent) {
		ev.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: 3}}
	})
	for name, tc := range map[string]struct {
		events []*historypb.HistoryEvent
		want   int
	}{
		"markers of one task are one action":      {[]*historypb.HistoryEvent{marker(4), marker(4), marker(4)}, 1},
		"markers of two tasks are two":            {[]*historypb.HistoryEvent{marker(4), marker(9)}, 2},
		"each attempt of an activity is one":      {[]*historypb.HistoryEvent{retried}, 3},
		"a scheduled activity is not yet started": {[]*historypb.HistoryEvent{event(enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, nil)}, 0},
		"a task's own events are free": {[]*historypb.HistoryEvent{event(enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),
			event(enums.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil), event(enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil)}, 0},
	} {
		if got := Count(tc.events).Actions; got != tc.want {
			t.Errorf("%s: %d actions, want %d", name, got, tc.want)
		}
	}
}
