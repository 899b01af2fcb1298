package workflows

import (
	"github.com/toolgate/toolgate/policy"
	"go.temporal.io/sdk/workflow"
)

// countDecision records the chain's verdict once per call.
func (c *call) countDecision(v policy.Verdict) {
	workflow.GetMetricsHandler(c.ctx).WithTags(map[string]string{
		"tool": c.metricTool(), "decision": string(v.Decision), "code": string(v.Code),
	}).Counter(MetricDecisions).Inc(1)
}

// countApproval records what happened to a card or to one decision on it.
func (c *call) countApproval(outcome string) {
	workflow.GetMetricsHandler(c.ctx).WithTags(map[string]string{"tool": c.metricTool(), "outcome": outcome}).
		Counter(MetricApprovals).Inc(1)
}

// metricTool keeps unknown (model-made) names from growing the label set.
func (c *call) metricTool() string {
	if _, ok := c.settings.Policy.Spec(c.in.Tool); ok {
		return c.in.Tool
	}
	return "unknown"
}
