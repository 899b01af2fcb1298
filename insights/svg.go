package insights

import (
	"fmt"
	"html"
	"html/template"
	"strings"
)

// Bar is one row of a chart: a label and one value per series (stacked).
type Bar struct {
	Label  string
	Values []float64
	// Flag marks the row (a rubber-stamp signal).
	Flag bool
}

// palette colours the series in order; the page's legend uses the same.
var palette = []string{"#2f6f4f", "#c48a00", "#b03a2e", "#1f5f99", "#7a4fa0", "#6b6b6b", "#118a7e", "#a0522d"}

// HBars renders stacked horizontal bars as an SVG drawn on the server (no
// script), with a legend, each segment's value in its tooltip and the
// total at the end of each bar. Presentation attributes only, so the card
// UI's Content-Security-Policy holds.
func HBars(title string, bars []Bar, legend []string, unit string) template.HTML {
	const width, labelW, rowH, pad = 640, 250, 24, 8
	if len(bars) == 0 {
		return template.HTML(`<p class="empty">Nothing in this period.</p>`)
	}
	max := 0.0
	for _, b := range bars {
		max = maxf(max, sum(b.Values))
	}
	plot := float64(width - labelW - 60)
	legendH := 22
	height := legendH + len(bars)*rowH + pad
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s" font-family="system-ui, sans-serif" font-size="12">`,
		width, height, html.EscapeString(title))
	fmt.Fprintf(&s, `<title>%s</title>`, html.EscapeString(title))
	x := 0
	for i, name := range legend {
		fmt.Fprintf(&s, `<rect x="%d" y="4" width="10" height="10" fill="%s"/><text x="%d" y="13">%s</text>`, x, palette[i%len(palette)], x+14, html.EscapeString(name))
		x += 24 + 7*len([]rune(name))
	}
	for r, b := range bars {
		y := legendH + r*rowH
		label := b.Label
		if b.Flag {
			label = "⚑ " + label
		}
		weight := "normal"
		if b.Flag {
			weight = "bold"
		}
		fmt.Fprintf(&s, `<text x="%d" y="%d" text-anchor="end" font-weight="%s" class="bar-label">%s</text>`, labelW-6, y+15, weight, html.EscapeString(clipLabel(label)))
		at := float64(labelW)
		for i, v := range b.Values {
			if v == 0 {
				continue
			}
			w := v / max * plot
			name := ""
			if i < len(legend) {
				name = legend[i]
			}
			fmt.Fprintf(&s, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s%s</title></rect>`,
				at, y+3, maxf(w, 1), rowH-8, palette[i%len(palette)], html.EscapeString(b.Label+" · "+name), num(v), unit)
			at += w
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" class="bar-total">%s%s</text>`, at+4, y+15, num(sum(b.Values)), unit)
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String()) //nolint:gosec // every text in it is escaped above
}

// maxLabel is the most runes a bar's label shows in labelW: a code and a
// tool's name of the demo packs fit whole; the bar's title holds all of it.
const maxLabel = 37

func clipLabel(s string) string {
	r := []rune(s)
	if len(r) > maxLabel {
		return string(r[:maxLabel-1]) + "…"
	}
	return s
}

func num(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

func sum(vs []float64) float64 {
	t := 0.0
	for _, v := range vs {
		t += v
	}
	return t
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
