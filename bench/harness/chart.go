package harness

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"slices"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The charts are PNG images drawn here with the standard library's image
// packages and the 7×13 bitmap font of golang.org/x/image: no plotting
// library, no external tool.

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

var (
	colText  = color.RGBA{0x22, 0x22, 0x22, 0xff}
	colMuted = color.RGBA{0x66, 0x66, 0x66, 0xff}
	colGrid  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	colLight = color.RGBA{0xee, 0xee, 0xee, 0xff}
)

// colorFor gives every system the same colour in every chart.
func colorFor(name string) color.RGBA {
	order := []string{"ontime", "ontime-compat", "asynq", "asynq-tuned", "river", "river-tuned", "pipeline", "redis-benchmark"}
	if i := slices.Index(order, name); i >= 0 {
		return palette[i%len(palette)]
	}
	h := 0
	for _, c := range name {
		h = h*31 + int(c)
	}
	return palette[(h&0x7fffffff)%len(palette)]
}

// canvas is a white RGBA image with drawing helpers.
type canvas struct {
	img *image.RGBA
}

func newCanvas(w, h int) *canvas {
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
	draw.Draw(c.img, c.img.Bounds(), image.White, image.Point{}, draw.Src)
	return c
}

func (c *canvas) rect(x0, y0, x1, y1 int, col color.RGBA) {
	draw.Draw(c.img, image.Rect(x0, y0, x1, y1), image.NewUniform(col), image.Point{}, draw.Src)
}

// line draws a line of the given width (Bresenham, thickened by squares).
func (c *canvas) line(x0, y0, x1, y1 float64, width int, col color.RGBA) {
	dx, dy := x1-x0, y1-y0
	n := int(math.Max(math.Abs(dx), math.Abs(dy))) + 1
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		x, y := int(math.Round(x0+dx*t)), int(math.Round(y0+dy*t))
		h := width / 2
		c.rect(x-h, y-h, x-h+width, y-h+width, col)
	}
}

// Text anchors.
const (
	anchorStart = iota
	anchorMiddle
	anchorEnd
)

// text writes s with its baseline at y. The bitmap font has ASCII only, so
// a few typographic characters are spelled out.
func (c *canvas) text(x, y int, s string, anchor int, col color.RGBA) {
	s = asciiText(s)
	d := font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13}
	w := d.MeasureString(s).Round()
	switch anchor {
	case anchorMiddle:
		x -= w / 2
	case anchorEnd:
		x -= w
	}
	d.Dot = fixed.P(x, y)
	d.DrawString(s)
}

var asciiReplacer = strings.NewReplacer("→", "->", "≥", ">=", "≤", "<=", "×", "x", "µ", "u", "—", "-", "–", "-")

func asciiText(s string) string { return asciiReplacer.Replace(s) }

func (c *canvas) png() []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, c.img); err != nil {
		panic(err) // encoding an in-memory RGBA image cannot fail
	}
	return b.Bytes()
}

func (c *canvas) title(w int, s string) {
	c.text(w/2, 22, s, anchorMiddle, colText)
}

type bar struct {
	label string
	value float64
	note  string // printed after the value
	color *color.RGBA
	gap   bool // extra space before this bar (a new group)
}

type legendItem struct {
	text  string
	color color.RGBA
}

// lighten mixes c halfway with white.
func lighten(c color.RGBA) color.RGBA {
	f := func(v uint8) uint8 { return uint8((int(v) + 2*255) / 3) }
	return color.RGBA{f(c.R), f(c.G), f(c.B), 0xff}
}

// barChart draws horizontal bars on a linear axis from zero, each labelled
// with its value, and the legend's lines under the title.
func barChart(title, unit string, bars []bar, legend []legendItem) []byte {
	const (
		width   = 820
		left    = 190
		right   = 170
		rowH    = 24
		barH    = 18
		gapH    = 10
		bottomM = 44
	)
	top := 44 + 18*len(legend)
	gaps := 0
	for _, b := range bars {
		if b.gap {
			gaps++
		}
	}
	height := top + rowH*len(bars) + gapH*gaps + bottomM
	maxV := 0.0
	for _, b := range bars {
		if !math.IsNaN(b.value) && b.value > maxV {
			maxV = b.value
		}
	}
	if maxV <= 0 {
		maxV = 1
	}
	scaleMax := niceCeil(maxV)
	plotW := float64(width - left - right)
	c := newCanvas(width, height)
	c.title(width, title)
	for i := 0; i <= 5; i++ {
		v := scaleMax * float64(i) / 5
		x := float64(left) + plotW*v/scaleMax
		c.line(x, float64(top-6), x, float64(height-bottomM+4), 1, colGrid)
		c.text(int(x), height-bottomM+18, fmtShort(v), anchorMiddle, colMuted)
	}
	c.text(left+int(plotW/2), height-8, unit, anchorMiddle, colText)
	for i, l := range legend {
		y := 40 + 18*i
		c.rect(left, y-9, left+14, y+1, l.color)
		c.text(left+20, y, l.text, anchorStart, colText)
	}
	y := top - rowH
	for _, b := range bars {
		y += rowH
		if b.gap {
			y += gapH
		}
		c.text(left-8, y+barH-4, b.label, anchorEnd, colText)
		if math.IsNaN(b.value) {
			c.text(left+4, y+barH-4, "not measured", anchorStart, colMuted)
			continue
		}
		w := plotW * b.value / scaleMax
		col := colorFor(b.label)
		if b.color != nil {
			col = *b.color
		}
		c.rect(left, y, left+int(math.Max(1, w)), y+barH, col)
		label := fmtShort(b.value)
		if b.note != "" {
			label += " " + b.note
		}
		c.text(left+int(w)+5, y+barH-4, label, anchorStart, colText)
	}
	return c.png()
}

type series struct {
	name   string
	sorted []float64 // ascending samples
}

// cdfChart draws the empirical CDF of each series on a log x axis (ms).
// Samples at or below the axis minimum (including early ones, < 0) are
// drawn at the left edge.
func cdfChart(title string, ss []series) []byte {
	const (
		width  = 820
		height = 440
		left   = 60
		right  = 170
		top    = 44
		bottom = 54
	)
	lo, hi := 0.1, 1.0
	for _, s := range ss {
		if n := len(s.sorted); n > 0 && s.sorted[n-1] > hi {
			hi = s.sorted[n-1]
		}
	}
	lo10, hi10 := math.Log10(lo), math.Ceil(math.Log10(hi))
	plotW, plotH := float64(width-left-right), float64(height-top-bottom)
	xOf := func(v float64) float64 {
		if v < lo {
			v = lo
		}
		return float64(left) + plotW*(math.Log10(v)-lo10)/(hi10-lo10)
	}
	yOf := func(p float64) float64 { return float64(top) + plotH*(1-p) }
	c := newCanvas(width, height)
	c.title(width, title)
	for e := lo10; e <= hi10; e++ {
		x := xOf(math.Pow(10, e))
		c.line(x, top, x, float64(height-bottom), 1, colGrid)
		c.text(int(x), height-bottom+16, fmtShort(math.Pow(10, e)), anchorMiddle, colMuted)
	}
	for _, p := range []float64{0, 0.25, 0.5, 0.75, 0.9, 0.99} {
		y := yOf(p)
		c.line(left, y, float64(width-right), y, 1, colLight)
		c.text(left-6, int(y)+4, fmt.Sprintf("%g", p), anchorEnd, colMuted)
	}
	c.text(8, top-10, "fraction of timers fired by then (y)", anchorStart, colText)
	c.text(left+int(plotW/2), height-12, fmt.Sprintf("fire time minus due time, ms (log scale; early or < %g ms at the left edge)", lo), anchorMiddle, colText)
	for i, se := range ss {
		n := len(se.sorted)
		if n == 0 {
			continue
		}
		col := colorFor(se.name)
		steps := min(n, 500)
		px, py := 0.0, 0.0
		for k := 0; k <= steps; k++ {
			idx := min(n-1, k*n/steps)
			x, y := xOf(se.sorted[idx]), yOf(float64(idx+1)/float64(n))
			if k > 0 {
				c.line(px, py, x, y, 2, col)
			}
			px, py = x, y
		}
		ly := top + 10 + i*18
		c.line(float64(width-right+10), float64(ly), float64(width-right+30), float64(ly), 3, col)
		c.text(width-right+35, ly+4, se.name, anchorStart, colText)
	}
	return c.png()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

// fmtShort formats 1500 as 1.5k, 2000000 as 2M, 0.25 as 0.25.
func fmtShort(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trimZeros(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case a >= 1e3:
		return trimZeros(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case a >= 10 || a == 0:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return trimZeros(fmt.Sprintf("%.1f", v))
	}
	return trimZeros(fmt.Sprintf("%.2g", v))
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
