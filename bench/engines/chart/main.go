// Command chart draws bench/results/e2e.json as bench/results/e2e.png (run from bench/engines):
// toolgate beside the bare workflow for each measure, as ratios of bare.
package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"slices"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

type results struct {
	Reads struct {
		Toolgate []float64 `json:"toolgate_ms"`
		Bare     []float64 `json:"bare_ms"`
	} `json:"reads"`
	Approvals struct {
		Toolgate []float64 `json:"toolgate_ms"`
		Bare     []float64 `json:"bare_ms"`
	} `json:"approvals"`
	Throughput map[string]float64 `json:"throughput"`
	Events     map[string]int     `json:"events"`
}

func pct(v []float64, p float64) float64 {
	c := slices.Clone(v)
	slices.Sort(c)
	if len(c) == 0 {
		return 0
	}
	return c[min(len(c)-1, int(float64(len(c))*p))]
}

func main() {
	in, out := "../results/e2e.json", "../results/e2e.png"
	if len(os.Args) > 2 {
		in, out = os.Args[1], os.Args[2]
	}
	b, err := os.ReadFile(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart: run make bench first:", err)
		os.Exit(1)
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
	bars := []struct {
		label    string
		tg, bare float64
		unit     string
	}{
		{"read p50", pct(r.Reads.Toolgate, .5), pct(r.Reads.Bare, .5), "ms"},
		{"read p99", pct(r.Reads.Toolgate, .99), pct(r.Reads.Bare, .99), "ms"},
		{"approval->run p50", pct(r.Approvals.Toolgate, .5), pct(r.Approvals.Bare, .5), "ms"},
		{"approval->run p99", pct(r.Approvals.Toolgate, .99), pct(r.Approvals.Bare, .99), "ms"},
		{"reads/s @32", r.Throughput["toolgate"], r.Throughput["bare"], "/s"},
		{"events/read", float64(r.Events["toolgate_read"]), float64(r.Events["bare_read"]), ""},
	}
	const w, h, left, rowH = 760, 360, 150, 48
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.White}, image.Point{}, draw.Src)
	ink, tgC, bareC := color.RGBA{0x1d, 0x23, 0x30, 255}, color.RGBA{0x0b, 0x5f, 0xff, 255}, color.RGBA{0xb0, 0xb8, 0xc4, 255}
	text := func(x, y int, s string, c color.Color) {
		d := font.Drawer{Dst: img, Src: &image.Uniform{c}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	text(10, 20, "toolgate vs a bare workflow making the same upstream calls (same run; bar = value / bare's)", ink)
	text(10, 38, "blue: toolgate   grey: bare", ink)
	scale := float64(w-left-170) / 3.0 // 3x bare fills the width
	for i, bar := range bars {
		y := 60 + i*rowH
		text(10, y+18, bar.label, ink)
		for j, v := range []float64{bar.tg, bar.bare} {
			c := []color.RGBA{tgC, bareC}[j]
			ratio := 0.0
			if bar.bare > 0 {
				ratio = v / bar.bare
			}
			length := int(min(ratio, 3) * scale)
			draw.Draw(img, image.Rect(left, y+j*18, left+length, y+j*18+14), &image.Uniform{c}, image.Point{}, draw.Src)
			text(left+length+6, y+j*18+11, fmt.Sprintf("%.1f%s (%.2fx)", v, bar.unit, ratio), ink)
		}
	}
	f, err := os.Create(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
	fmt.Println("chart:", out)
}
