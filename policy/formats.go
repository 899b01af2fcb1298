package policy

import "fmt"

// Tool definition formats of the model APIs.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatMCP       = "mcp"
)

// OpenAITool is a Chat Completions tool: {"type": "function", "function": {...}}.
type OpenAITool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an OpenAI tool.
type OpenAIFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

// AnthropicTool is a Messages API tool.
type AnthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

// MCPToolList is the result of an MCP tools/list request.
type MCPToolList struct {
	Tools []MCPTool `json:"tools"`
}

// MCPTool is one MCP tool with its behaviour hints.
type MCPTool struct {
	Name        string         `json:"name"`
	Title       string         `json:"title,omitempty"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
	Annotations MCPAnnotations `json:"annotations"`
}

// MCPAnnotations are MCP's tool hints, from the risk tier and idempotency.
type MCPAnnotations struct {
	ReadOnlyHint    bool `json:"readOnlyHint"`
	DestructiveHint bool `json:"destructiveHint"`
	IdempotentHint  bool `json:"idempotentHint"`
	OpenWorldHint   bool `json:"openWorldHint"`
}

// DefinitionsAs returns the tools a role may be offered in a model API's own shape.
func (p *Policy) DefinitionsAs(role Role, format string) (any, error) {
	defs := p.DefinitionsFor(role)
	switch format {
	case FormatOpenAI:
		out := make([]OpenAITool, 0, len(defs))
		for _, d := range defs {
			out = append(out, OpenAITool{Type: "function", Function: OpenAIFunction{Name: d.Name, Description: d.Description, Parameters: d.InputSchema}})
		}
		return out, nil
	case FormatAnthropic:
		out := make([]AnthropicTool, 0, len(defs))
		for _, d := range defs {
			out = append(out, AnthropicTool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema})
		}
		return out, nil
	case FormatMCP:
		out := MCPToolList{Tools: make([]MCPTool, 0, len(defs))}
		for _, d := range defs {
			out.Tools = append(out.Tools, MCPTool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema, Annotations: MCPAnnotations{
				ReadOnlyHint:    d.Tier == TierRead,
				DestructiveHint: d.Tier == TierWrite || d.Tier == TierIrreversible,
				IdempotentHint:  d.Idempotent,
				// The tools reach their packs' own systems, not the open web.
				OpenWorldHint: false,
			}})
		}
		return out, nil
	case "", "toolgate":
		return defs, nil
	}
	return nil, fmt.Errorf("unknown format %q: use %s, %s or %s", format, FormatOpenAI, FormatAnthropic, FormatMCP)
}
