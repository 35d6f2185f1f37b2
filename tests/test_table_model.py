"""The table model: one DataFrame of cells, the paper's LaTeX (render_tabular) and the
report's HTML (pandas Styler) from it; the TeX vocabulary of the cells as HTML."""

import re

import pytest

from schedlab.report.table_model import Table, tex_html
from schedlab.report.tables import fmt_delta, fmt_pm, latex_table, metric_head, render_tabular

COLUMNS = [("", "l"), ("variant", "l"), (r"mean $\pm$ CI", "r"), (r"$\Delta$\,\% (interval)", "r")]
GROUPS = [("vms", 1), ("", 1), (metric_head({"name": "lat", "label": "latency", "unit": "us", "better": "lower"}), 2)]


def _rows():
    return [
        ["1", "base", fmt_pm(10.0, 1.0), r"\multicolumn{1}{c}{baseline}"],
        ["", "fix", fmt_pm(8.0, 0.5), fmt_delta(-20.0, -30.0, -10.0, "*")],
        None,
        ["2", "base", fmt_pm(12.0, 1.0), r"\multicolumn{1}{c}{baseline}"],
        ["", "fix", fmt_pm(12.5, 2.0), fmt_delta(4.2, None, 9.0, r"\approx")],
        None,
    ]


def test_latex_is_render_tabulars():
    t = Table.from_rows(COLUMNS, _rows(), GROUPS, "A caption.", "tab:x")
    assert t.latex() == latex_table(render_tabular(COLUMNS, _rows(), GROUPS), "A caption.", "tab:x")
    assert t.n_rows == 4 and t.blocks == [2]


def test_html_has_every_row_units_arrows_and_intervals():
    t = Table.from_rows(COLUMNS, _rows(), GROUPS, r"S0, sim testbed. $^{*}$: significant; 50\,\%.", "tab:x")
    page = t.html("S0")
    body = page.split("<tbody>")[1].split("</tbody>")[0]
    assert len(re.findall(r"<tr>", body)) == 4
    assert "latency [µs] ↓" in page and "\\" not in page.split("<details>")[0]
    assert '−20<span class="ends"><sup>+10</sup><sub>−10</sub></span>\u2009<sup>*</sup>' in body
    assert "<sub>−∞</sub>" in body and "<sup>≈</sup>" in body
    assert "10.0\u2009±\u20091.0" in body and 'class="data row0 col3 c" >baseline<' in body
    assert "<sup>*</sup>: significant; 50\u2009%." in page
    assert not t.unknown


def test_a_command_outside_the_vocabulary_is_kept_and_listed():
    unknown = set()
    assert tex_html(r"a \frobnicate{b} c", unknown) == r"a \frobnicateb c"
    assert unknown == {"frobnicate"}


@pytest.mark.parametrize(
    "tex, html",
    [
        (r"\num{-1.5}\,$\pm$\,\num{0.2}", "−1.5\u2009±\u20090.2"),
        (r"[\textmu s] $\uparrow$", "[µs] ↑"),
        (r"swap base $\leftrightarrow$ yield", "swap base ↔ yield"),  # the kill matrix's swaps
        (r"$\circ$: a calibration point", "∘: a calibration point"),  # the validation table's marks
        (r"both 0 $\circ$", "both 0 ∘"),  # the validation table's calibration mark
        (r"\textbf{reproduced}: yes.\newline \texttt{a\_b}", "<b>reproduced</b>: yes.<br><code>a_b</code>"),
        (r"\begin{tabular}[t]{@{}l@{}}0.8 $\checkmark$\\[-2pt]{\scriptsize [0.5, 1.3]}\end{tabular}",
         "0.8 ✓<br><small>[0.5, 1.3]</small>"),
        (r"``q'' -- x~y \& 5\%", "“q” – x\u00a0y &amp; 5%"),
        (r"x\textsuperscript{cal}", "x<sup>cal</sup>"),
        (r"<&>", "&lt;&amp;&gt;"),
        # a cross-reference: the paper's part by name, never the raw key (the verdict caption)
        (r"Section~\ref{sec:verdicts}", 'Section\u00a0<em class="ref" title="in the paper">verdicts</em>'),
    ],
)  # fmt: skip
def test_tex_html(tex, html):
    assert tex_html(tex) == html


def test_from_latex_reads_back_what_it_wrote():
    rows = _rows()
    rows[4] = ["", "not measured: no trace", "", ""]  # a note spanning the value columns
    t = Table.from_rows(COLUMNS, rows, GROUPS, "Cap.", "tab:x", preamble=r"\footnotesize")
    t.spans = {3: 1}
    back = Table.from_latex(t.latex())
    assert back.latex() == t.latex()
    assert back.body.values.tolist() == t.body.values.tolist()
    assert (back.groups, back.blocks, back.spans, back.caption, back.label) == (GROUPS, [2], {3: 1}, "Cap.", "tab:x")


def test_a_spanning_row_is_one_multicolumn_line():
    t = Table.from_rows([("", "l"), ("a", "r"), ("b", "r")], [["S3", "not measured: no trace", ""]])
    t.spans = {0: 1}
    assert r"S3 & \multicolumn{2}{l}{not measured: no trace} \\" in t.latex()
    assert 'class="l span"' in t.html_table() or "span" in t.html_table()
