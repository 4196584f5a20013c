package report

import (
	"fmt"
	"html/template"
	"io"
	"time"
)

// Page is one report: the header (what ran, on which Sluice, on which machine), an optional
// verdict, and its sections in order.
type Page struct {
	Title     string
	Version   string    // the Sluice version (cmd/sluice's `version`), "" if unknown
	Generated time.Time // zero: now
	// Verdict is a one-line outcome shown under the title (sluice chaos's); Failed draws it as
	// a failure.
	Verdict  string
	Failed   bool
	Settings []Setting // the run's settings, as the caller names them
	Machine  Machine
	Notes    []string // paragraphs under the header
	Sections []Section
}

// Setting is one key/value pair of the header.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Section is a heading with, below it, a paragraph, a table and a row of charts (each
// optional). Two charts are drawn side by side, each half the page's width; one alone takes
// it all. A chart with nothing to draw is left out, and a section left with nothing at all.
type Section struct {
	Heading string
	Text    string
	Table   *Table
	Charts  []Chart
}

// Table is a table of text cells; Columns heads it.
type Table struct {
	Columns []Column
	Rows    [][]Cell
}

// Column is a table's heading cell; Title is its tooltip.
type Column struct {
	Name  string
	Title string
}

// Cell is one table cell. Swatch (a colour) draws a square before the text, matching the
// row's series in the charts; Bad marks a cell that shows a problem; Title is a tooltip.
type Cell struct {
	Text   string
	Title  string
	Bad    bool
	Swatch string
}

// Write writes p as a self-contained HTML page (no scripts, no external files).
func Write(w io.Writer, p Page) error {
	if p.Generated.IsZero() {
		p.Generated = time.Now()
	}
	view := pageView{Page: p, Generated: p.Generated.UTC().Format(time.RFC3339), Machine: p.Machine.Settings()}
	for _, s := range p.Sections {
		sv := sectionView{Section: s}
		var drawn []Chart
		for _, c := range s.Charts {
			if c != nil && !c.empty() {
				drawn = append(drawn, c)
			}
		}
		for _, c := range drawn {
			// Built from numbers and escaped text only.
			sv.SVGs = append(sv.SVGs, template.HTML(c.svg(rowWidth/float64(len(drawn)))))
		}
		if sv.Text == "" && sv.Table == nil && len(sv.SVGs) == 0 {
			continue
		}
		if len(sv.SVGs) > 0 {
			sv.ChartWidth = fmt.Sprintf("%.4g%%", 100/float64(len(sv.SVGs)))
		}
		view.Sections = append(view.Sections, sv)
	}
	return pageTemplate.Execute(w, view)
}

type pageView struct {
	Page
	Generated string
	Machine   []Setting
	Sections  []sectionView
}

type sectionView struct {
	Section
	SVGs       []template.HTML
	ChartWidth string
}

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin-bottom: 24px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.header { display: flex; flex-wrap: wrap; gap: 8px 48px; margin-bottom: 16px; }
.header table td, .header table th { text-align: left; padding: 2px 10px 2px 0; }
.header th { font-weight: normal; color: #666; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: middle; }
.err { color: #b00; }
.verdict { font-size: 1.1em; font-weight: bold; padding: 8px 12px; border-left: 4px solid #2ca02c; background: #f3faf3; }
.verdict.failed { border-color: #d62728; background: #fdf3f3; }
.charts { display: flex; width: 100%; }
.charts > div { box-sizing: border-box; padding-right: 8px; }
</style></head><body>
<h1>{{.Title}}</h1>
{{if .Verdict}}<p class="verdict{{if .Failed}} failed{{end}}">{{.Verdict}}</p>
{{end}}<div class="header">
{{if .Settings}}<table class="settings"><caption style="text-align:left"><b>Settings</b></caption>
{{range .Settings}}<tr><th>{{.Key}}</th><td>{{.Value}}</td></tr>
{{end}}</table>{{end}}
<table class="machine"><caption style="text-align:left"><b>Machine</b></caption>
{{range .Machine}}<tr><th>{{.Key}}</th><td>{{.Value}}</td></tr>
{{end}}<tr><th>sluice</th><td>{{if .Version}}{{.Version}}{{else}}unknown{{end}}</td></tr>
<tr><th>generated</th><td>{{.Generated}}</td></tr>
</table>
</div>
{{range .Notes}}<p>{{.}}</p>
{{end}}{{range .Sections}}{{if .Heading}}<h2>{{.Heading}}</h2>
{{end}}{{if .Text}}<p>{{.Text}}</p>
{{end}}{{with .Table}}<table>
<tr>{{range .Columns}}<th{{if .Title}} title="{{.Title}}"{{end}}>{{.Name}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td{{if .Bad}} class="err"{{end}}{{if .Title}} title="{{.Title}}"{{end}}>{{if .Swatch}}<span class="swatch" style="background:{{.Swatch}}"></span>{{end}}{{.Text}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{if .SVGs}}<div class="charts">{{$w := .ChartWidth}}{{range .SVGs}}<div style="width:{{$w}}">{{.}}</div>{{end}}</div>
{{end}}{{end}}</body></html>
`))
