package workflows

import (
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/workflow"
)

// countDecision records the chain's verdict v once per call of tool
// (metricTool's label).
func countDecision(ctx workflow.Context, tool string, v policy.Verdict) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
		"tool": tool, "decision": string(v.Decision), "code": string(v.Code),
	}).Counter(MetricDecisions).Inc(1)
}

// countApproval records what happened to a card of tool (metricTool's
// label), or to one decision on it.
func countApproval(ctx workflow.Context, tool, outcome string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"tool": tool, "outcome": outcome}).
		Counter(MetricApprovals).Inc(1)
}

// metricTool is the label metrics give tool: unknown (model-made) names
// are one label, so they never grow the label set.
func metricTool(p *policy.Policy, tool string) string {
	if _, ok := p.Spec(tool); ok {
		return tool
	}
	return "unknown"
}
