"""One table, two renderers: the paper's LaTeX and the report's HTML, from one DataFrame.

`render_tabular` (booktabs, siunitx numbers) is the paper's one table renderer, `latex_table`
its float. A `Table` holds its cells as a DataFrame (one row per table row, one column per column, each
cell in the paper's LaTeX markup as the report modules write it), the columns' headers and
alignments, an optional row of header groups, the blocks its rows fall into, its caption and
label. `latex()` renders it through them; `html()` renders the same frame with pandas'
Styler, each cell and header through `tex_html`, which sets the small vocabulary of markup the
report modules use (numbers, units, arrows, intervals as super/subscripts, stacked lines) as
HTML. A command outside that vocabulary is kept visible (`\\name`) and listed in
`Table.unknown`, so a test catches a new one instead of a cell silently losing it.

`Table.from_latex` reads back a tabular that render_tabular wrote (its own regular format, one
row per line), so a table written elsewhere as LaTeX only still reaches the report."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from schedlab.core.files import atomic_write

# --- the paper's LaTeX ----------------------------------------------------------


def render_tabular(columns, rows, groups=None) -> str:
    """The paper's one table renderer: a booktabs tabular.

    columns: (header, align) pairs, headers in LaTeX (escape text with latex_escape).
    rows: lists of cells in LaTeX, one per column; None between two rows adds space.
    groups: an optional header row above the columns' headers, (LaTeX, span) pairs
    covering every column; a group over several columns is centred and ruled."""
    columns = list(columns)
    n = len(columns)
    lines = [rf"\begin{{tabular}}{{{''.join(a for _, a in columns)}}}", r"\toprule"]
    if groups:
        groups = list(groups)
        if sum(span for _, span in groups) != n:
            raise ValueError(f"render_tabular: header groups span {sum(s for _, s in groups)} of {n} columns")
        heads, rules, c0 = [], [], 1
        for text, span in groups:
            if span > 1:
                heads.append(rf"\multicolumn{{{span}}}{{c}}{{{text}}}")
                rules.append(rf"\cmidrule(lr){{{c0}-{c0 + span - 1}}}")
            else:
                heads.append(text)
            c0 += span
        lines += [" & ".join(heads) + r" \\", "".join(rules)] if rules else [" & ".join(heads) + r" \\"]
    lines += [" & ".join(h for h, _ in columns) + r" \\", r"\midrule"]
    rows = list(rows)
    while rows and rows[-1] is None:
        rows.pop()
    for i, row in enumerate(rows):
        if row is None:
            lines.append(r"\addlinespace")
            continue
        if len(row) != n:
            raise ValueError(f"render_tabular: row {i} has {len(row)} cells for {n} columns")
        lines.append(" & ".join(str(c) for c in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def latex_table(tabular: str, caption: str, label: str) -> str:
    """A tabular as a floating table at the body's size. One wider than the line is still shrunk to
    fit, but LaTeX warns (`schedlab: table LABEL shrunk`), and the paper's tests fail on it: a wide
    table is to be split or transposed, not printed below legibility."""
    return (
        r"\begin{table}[tbp]"
        "\n"
        r"\centering"
        "\n"
        r"\sbox0{%"
        "\n" + tabular + "}\n"
        r"\ifdim\wd0>\linewidth\PackageWarning{schedlab}{table " + label + r" shrunk to the line width}"
        r"\resizebox{\linewidth}{!}{\usebox0}\else\usebox0\fi"
        "\n" + rf"\caption{{{caption}}}" + "\n" + rf"\label{{{label}}}" + "\n" + r"\end{table}" + "\n"
    )


# --- TeX fragments as HTML ----------------------------------------------------

# control words that stand for a character (text or math mode)
_SYMBOL = {
    "pm": "±",
    "times": "×",
    "approx": "≈",
    "ddagger": "‡",
    "dagger": "†",
    "infty": "∞",
    "Delta": "Δ",
    "alpha": "α",
    "sigma": "σ",
    "mu": "µ",
    "textmu": "µ",
    "ldots": "…",
    "dots": "…",
    "textminus": "−",
    "uparrow": "↑",
    "downarrow": "↓",
    "rightarrow": "→",
    "leftarrow": "←",
    "leftrightarrow": "↔",
    "to": "→",
    "in": "∈",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "neq": "≠",
    "cdot": "·",
    "circ": "∘",
    "bullet": "•",
    "sim": "∼",
    "S": "§",
    "textdegree": "°",
    "textbackslash": "\\",
    "textasciitilde": "~",
    "textasciicircum": "^",
    "textless": "<",
    "textgreater": ">",
    "textbar": "|",
    "quad": "\u2003",
    "qquad": "\u2003\u2003",
    "checkmark": "✓",
    "log": "log",
    "ln": "ln",
    "min": "min",
    "max": "max",
    "LaTeX": "LaTeX",
    "TeX": "TeX",
}
# control words that only steer TeX's layout: nothing to show
_LAYOUT = {
    "allowbreak",
    "par",
    "centering",
    "raggedright",
    "arraybackslash",
    "noindent",
    "relax",
    "hfill",
    "sloppy",
    "toprule",
    "midrule",
    "bottomrule",
    "addlinespace",
    "hline",
    "displaystyle",
    "left",
    "right",
}
_SIZE = {"tiny", "scriptsize", "footnotesize", "small"}
# binary operators and relations: spaced in math, as TeX sets them (not in a super/subscript)
_SPACED = {
    "pm",
    "times",
    "approx",
    "in",
    "le",
    "leq",
    "ge",
    "geq",
    "ne",
    "neq",
    "cdot",
    "sim",
    "to",
    "rightarrow",
    "leftarrow",
    "leftrightarrow",
}
# commands whose argument is shown, wrapped in an element ("" = as is)
_WRAP = {
    "textbf": "b",
    "bfseries": "b",
    "emph": "em",
    "textit": "em",
    "mathit": "em",
    "texttt": "code",
    "url": "code",
    "textsuperscript": "sup",
    "textsubscript": "sub",
    "underline": "u",
    "textrm": "",
    "textsf": "",
    "textnormal": "",
    "mathrm": "",
    "text": "",
    "mbox": "",
    "ensuremath": "",
    "textsc": "",
    "citep": "",
    "cite": "",
}
# commands whose arguments are skipped (how many)
_SKIP = {"setlength": 2, "vspace": 1, "hspace": 1, "label": 1, "cmidrule": 1, "rule": 2, "phantom": 1}
_ESCAPED = {"%": "%", "&": "&amp;", "_": "_", "#": "#", "$": "$", "{": "{", "}": "}", " ": " "}
_SPACE = {",": "\u2009", ";": "\u2005", ":": "\u2005", "!": ""}


class _Tex:
    """A recursive-descent reader of one TeX fragment, writing HTML."""

    def __init__(self, s: str, unknown: set[str], script: bool = False):
        self.s, self.i, self.unknown, self.script = s, 0, unknown, script

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def group(self) -> str:
        """The raw text of the {...} group at the cursor (braces matched), or one token."""
        self.skip_spaces()
        if self.peek() != "{":
            if self.peek() == "\\":
                m = re.compile(r"\\([A-Za-z]+|.)").match(self.s, self.i)
                self.i = m.end()
                return m.group(0)
            ch = self.peek()
            self.i += 1
            return ch
        depth, start = 0, self.i
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch == "\\":
                self.i += 2
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            self.i += 1
            if depth == 0:
                return self.s[start + 1 : self.i - 1]
        return self.s[start + 1 :]

    def optional(self) -> str | None:
        """An optional [...] argument at the cursor."""
        if self.peek() != "[":
            return None
        j = self.s.find("]", self.i)
        j = len(self.s) if j < 0 else j
        arg, self.i = self.s[self.i + 1 : j], j + 1
        return arg

    def skip_spaces(self) -> None:
        while self.peek() in (" ", "\n", "\t") and self.peek():
            self.i += 1

    def sub(self, text: str, math: bool, script: bool | None = None) -> str:
        return _Tex(text, self.unknown, self.script if script is None else script).run(math)

    def run(self, math: bool = False, stop: str = "") -> str:
        out: list[str] = []
        while self.i < len(self.s):
            ch = self.s[self.i]
            if stop and ch == stop:
                self.i += 1
                break
            if ch == "\\":
                out.append(self.command(math, out))
            elif ch == "{":
                out.append(self.sub(self.group(), math))
            elif ch == "}":
                self.i += 1
            elif ch == "$":
                self.i += 1
                out.append(self.run(math=not math, stop="$") if not math else "")
                if math:
                    break
            elif math and ch in "^_":
                self.i += 1
                tag = "sup" if ch == "^" else "sub"
                out.append(f"<{tag}>{self.sub(self.group(), True, script=True)}</{tag}>")
                # v^{+a}_{-b}: the interval's ends stacked, as the paper sets them
                if len(out) >= 2 and out[-1].startswith("<sub>") and out[-2].startswith("<sup>"):
                    sup, sub = out[-2], out.pop()
                    out[-1] = f'<span class="ends">{sup}{sub}</span>'
            elif math and ch == "-":
                self.i += 1
                out.append("−")
            elif math and ch in " \n\t":
                self.i += 1
            elif ch == "~":
                self.i += 1
                out.append("\u00a0")
            elif self.s.startswith("---", self.i):
                self.i += 3
                out.append("—")
            elif self.s.startswith("--", self.i):
                self.i += 2
                out.append("–")
            elif self.s.startswith("``", self.i):
                self.i += 2
                out.append("“")
            elif self.s.startswith("''", self.i):
                self.i += 2
                out.append("”")
            elif ch == "%":  # a comment to the end of the line
                j = self.s.find("\n", self.i)
                self.i = len(self.s) if j < 0 else j + 1
            else:
                self.i += 1
                out.append(html.escape(ch, quote=False))
        return "".join(out)

    def command(self, math: bool, out: list[str]) -> str:
        m = re.compile(r"\\([A-Za-z]+)\*?|\\(.)", re.S).match(self.s, self.i)
        self.i = m.end()
        name, sym = m.group(1), m.group(2)
        if name is not None:
            self.skip_spaces()  # TeX drops the spaces after a control word
        if sym is not None:
            if sym == "\\":  # a line break, with an optional [skip]
                self.optional()
                return "<br>"
            if sym in _SPACE:
                return _SPACE[sym]
            return _ESCAPED.get(sym, html.escape(sym, quote=False))
        if name in _SYMBOL:
            if self.peek() == "{" and self.peek(1) == "}":
                self.i += 2  # \textbackslash{}
            text = html.escape(_SYMBOL[name], quote=False)
            if math and not self.script and name in _SPACED and "".join(out).strip():
                return f" {text} "
            return text
        if name in _LAYOUT:
            self.optional()
            return ""
        if name in _SIZE:  # a size switch: the rest of its group in small type
            return f"<small>{self.run(math)}</small>"
        if name == "newline":
            return "<br>"
        if name in _SKIP:
            self.optional()
            for _ in range(_SKIP[name]):
                self.group()
            return ""
        if name in ("num", "SI"):
            text = self.sub(self.group(), False).replace("-", "−")
            return text + ((" " + self.sub(self.group(), False)) if name == "SI" else "")
        if name == "multicolumn":
            self.group()
            self.group()
            return self.sub(self.group(), math)
        if name == "begin":
            env = self.group()
            self.optional()
            if env in ("tabular", "array"):
                self.group()  # column spec
            end = self.s.find(rf"\end{{{env}}}", self.i)
            end = len(self.s) if end < 0 else end
            body, self.i = self.s[self.i : end], min(len(self.s), end + len(rf"\end{{{env}}}"))
            return self.sub(body, math)
        if name == "end":
            self.group()
            return ""
        if name in ("ref", "eqref"):
            # the report has no section numbers: name the paper's part by its label
            # (sec:verdicts -> "verdicts"), marked as the paper's
            key = re.sub(r"^[a-z]+:", "", self.group()).replace("-", " ")
            return f'<em class="ref" title="in the paper">{html.escape(key, quote=False)}</em>'
        if name in _WRAP:
            tag = _WRAP[name]
            inner = self.sub(self.group(), math and name not in ("text", "mbox", "textrm"))
            return f"<{tag}>{inner}</{tag}>" if tag else inner
        self.unknown.add(name)
        return html.escape(m.group(0), quote=False)


def tex_html(tex, unknown: set[str] | None = None) -> str:
    """A LaTeX fragment of the report modules (a cell, a header, a caption) as HTML; commands
    outside the vocabulary are kept as text and added to `unknown`."""
    if tex is None or (isinstance(tex, float) and tex != tex):
        return ""
    return _Tex(str(tex), unknown if unknown is not None else set()).run().strip()


# --- the table ----------------------------------------------------------------


@dataclass
class Table:
    """One table: `body` (cells in LaTeX), `heads` and `aligns` (one per column), `groups`
    (optional (LaTeX, span) pairs above the headers), `blocks` (the row numbers that start a
    block after the first, set apart), `spans` ({row: first column} of a row whose text runs
    from that column to the last, e.g. a note in place of values), caption and label (LaTeX),
    `preamble` (LaTeX before the tabular: \\setlength, a size)."""

    body: pd.DataFrame
    heads: list[str]
    aligns: list[str]
    caption: str = ""
    label: str = ""
    groups: list[tuple[str, int]] | None = None
    blocks: list[int] = field(default_factory=list)
    spans: dict[int, int] = field(default_factory=dict)
    preamble: str = ""
    unknown: set[str] = field(default_factory=set)

    @classmethod
    def from_rows(cls, columns, rows, groups=None, caption: str = "", label: str = "", preamble: str = "") -> Table:
        """From render_tabular's arguments: (header, align) pairs and rows of cells, None
        between two blocks."""
        columns = list(columns)
        body, blocks = [], []
        for row in rows:
            if row is None:
                if body and (not blocks or blocks[-1] != len(body)):
                    blocks.append(len(body))
                continue
            if len(row) != len(columns):
                raise ValueError(f"Table: row {len(body)} has {len(row)} cells for {len(columns)} columns")
            body.append([str(c) for c in row])
        blocks = [b for b in blocks if b < len(body)]
        frame = pd.DataFrame(body, columns=range(len(columns)), dtype=object)
        return cls(
            frame,
            [h for h, _ in columns],
            [a for _, a in columns],
            caption,
            label,
            list(groups) if groups else None,
            blocks,
            preamble=preamble,
        )

    @property
    def n_rows(self) -> int:
        return len(self.body)

    def rows(self) -> list[list[str] | None]:
        """render_tabular's rows: the body, None before each block."""
        out: list = []
        starts = set(self.blocks)
        for i, row in enumerate(self.body.itertuples(index=False)):
            if i in starts:
                out.append(None)
            out.append(list(row))
        return out

    # --- LaTeX -----------------------------------------------------------------
    def tabular(self) -> str:
        rows = self.rows()
        if not self.spans:
            return render_tabular(zip(self.heads, self.aligns), rows, self.groups)
        # a spanning row: render_tabular takes whole rows of cells; put the \multicolumn in afterwards
        mark, k, lines = "\x00span", 0, []
        marked = []
        for row in rows:
            if row is not None and k in self.spans:
                c0 = self.spans[k]
                row = row[:c0] + [f"{mark}{k}"] + [""] * (len(row) - c0 - 1)
            if row is not None:
                k += 1
            marked.append(row)
        for line in render_tabular(zip(self.heads, self.aligns), marked, self.groups).split("\n"):
            m = re.search(f"{mark}(\\d+)", line)
            if m:
                r = int(m.group(1))
                c0, n = self.spans[r], len(self.heads)
                head = list(self.body.iloc[r, :c0])
                line = " & ".join([*head, rf"\multicolumn{{{n - c0}}}{{l}}{{{self.body.iloc[r, c0]}}}"]) + r" \\"
            lines.append(line)
        return "\n".join(lines)

    def latex(self) -> str:
        """The floating table as the paper inputs it."""
        return latex_table((self.preamble + "\n" if self.preamble else "") + self.tabular(), self.caption, self.label)

    # --- HTML ------------------------------------------------------------------
    def _html(self, tex) -> str:
        return tex_html(tex, self.unknown)

    def styler(self):
        """The body as a pandas Styler: headers (and their groups) and cells as HTML, each
        column aligned as in the paper, the first row of each block ruled."""
        n = len(self.heads)
        body = self.body.copy()
        if self.groups:
            keys, labels, c = [], {}, 0
            for g, (text, span) in enumerate(self.groups):
                keys += [f"g{g}"] * span
                labels[f"g{g}"] = self._html(text)
                c += span
            if c != n:
                raise ValueError(f"Table: header groups span {c} of {n} columns")
            body.columns = pd.MultiIndex.from_arrays([keys, [f"c{j}" for j in range(n)]])
        else:
            labels = {}
            body.columns = [f"c{j}" for j in range(n)]
        labels.update({f"c{j}": self._html(h) for j, h in enumerate(self.heads)})
        align = {"l": "l", "r": "r", "c": "c"}
        cls = pd.DataFrame(
            [[align.get(a[-1:] if a[-1:] in "lrc" else "l", "l") for a in self.aligns] for _ in range(len(body))],
            index=body.index,
            columns=body.columns,
        )
        for (r, c), v in self.body.stack().items():
            m = re.match(r"\\multicolumn\{1\}\{([lrc])\}", str(v))
            if m:  # a cell aligned on its own (\multicolumn{1}{c}{baseline})
                cls.iloc[r, c] = m.group(1)
        for b in self.blocks:
            cls.iloc[b] = cls.iloc[b] + " block"
        for r, c0 in self.spans.items():
            cls.iloc[r, c0] = cls.iloc[r, c0] + " span"
        st = body.style.format(self._html).format_index(lambda k: labels[k], axis="columns", escape=None)
        st = st.hide(axis="index").set_td_classes(cls)
        st.cell_ids = False
        # a paragraph column (p{4.2cm}) wraps at a width in proportion to its paper width (on screen
        # the text is larger than the paper's footnotesize: 1 cm ~ 4 em)
        wide = []
        for j, a in enumerate(self.aligns):
            m = re.search(r"p\{([0-9.]+)cm\}", a)
            if m:
                width = f"{float(m.group(1)) * 4:.1f}em"
                wide.append(
                    {"selector": f"td.col{j}", "props": f"white-space: normal; min-width: {width}; max-width: {width};"}
                )
        if wide:
            st = st.set_table_styles(wide, overwrite=False)
        return st.set_uuid(re.sub(r"[^A-Za-z0-9]", "-", self.label) or "table")

    def html_table(self) -> str:
        return self.styler().to_html(doctype_html=False)

    def html(self, title: str | None = None, sidecar: dict | None = None, source_name: str = "") -> str:
        """The report's page of the table: a title, the table, its caption, what the
        sidecar traces and the LaTeX source."""
        side = ""
        if sidecar is not None:
            n = len(sidecar.get("cells", {}))
            extra = f"; raw data sha256:{sidecar['data_hash'][:16]}" if sidecar.get("data_hash") else ""
            cmd = f"schedlab trace {sidecar['table']} CELL" if sidecar.get("table") else ""
            side = (
                f'<p class="sidecar">Sidecar: {n} cells traced to their runs{html.escape(extra)}'
                + (f" (<code>{html.escape(cmd)}</code>)" if cmd else "")
                + ".</p>"
            )
        table = self.html_table()
        return _PAGE.format(
            title=html.escape(title or self.label or "table"),
            table=table,
            caption=self._html(self.caption),
            sidecar=side,
            name=html.escape(source_name or "LaTeX"),
            source=html.escape(self.latex()),
            rows=self.n_rows,
        )

    def write(self, tex_path: Path, html_path: Path | None = None, sidecar: dict | None = None, title=None) -> None:
        """TEX (the paper's) and HTML (the report's; default: beside it, .html)."""
        tex_path = Path(tex_path)
        atomic_write(tex_path, self.latex())
        html_path = Path(html_path) if html_path else tex_path.with_suffix(".html")
        atomic_write(html_path, self.html(title, sidecar, tex_path.name))

    # --- reading render_tabular's output back ------------------------------------
    @classmethod
    def from_latex(cls, tex: str) -> Table:
        """A floating table that latex_table(render_tabular(...)) wrote, read back: its one
        row per line (` & ` between cells at brace depth 0, `\\\\` at the end), \\addlinespace
        between blocks, an optional header-group row with \\cmidrule under it."""
        start = tex.find(r"\begin{tabular}")
        if start < 0:
            raise ValueError("no tabular")
        preamble = tex[:start]
        preamble = preamble[preamble.rfind("{%") + 2 :].strip() if "{%" in preamble else ""
        r = _Tex(tex, set())
        r.i = start + len(r"\begin{tabular}")
        r.optional()
        spec = r.group()
        end = _matching_end(tex, r.i)
        lines = [ln.strip() for ln in tex[r.i : end].split("\n") if ln.strip()]
        aligns = _spec_columns(spec)
        groups, heads, rows, after_mid = None, None, [], False
        for ln in lines:
            if ln in (r"\toprule", r"\bottomrule") or ln.startswith(r"\cmidrule"):
                continue
            if ln == r"\midrule":
                after_mid = True
                continue
            if ln == r"\addlinespace":
                rows.append(None)
                continue
            cells = _split_cells(ln.removesuffix(r"\\").rstrip())
            if not after_mid:
                if heads is not None:  # two header lines: the first was the groups
                    groups = [_group_of(c) for c in heads]
                heads = cells
                continue
            rows.append(cells)
        spans = {}
        body_rows = []
        for row in rows:
            if row is None:
                body_rows.append(None)
                continue
            if len(row) < len(aligns) and row and row[-1].startswith(r"\multicolumn"):
                n = int(re.match(r"\\multicolumn\{(\d+)\}", row[-1]).group(1))
                c0 = len(row) - 1
                inner = _Tex(row[-1], set())
                inner.i = len(r"\multicolumn")
                inner.group(), inner.group()
                row = row[:-1] + [inner.group()] + [""] * (n - 1)
                spans[len([x for x in body_rows if x is not None])] = c0
            body_rows.append(row)
        t = cls.from_rows(list(zip(heads or [""] * len(aligns), aligns)), body_rows, groups)
        t.spans = spans
        t.preamble = preamble
        t.caption = _arg_of(tex, "caption")
        t.label = _arg_of(tex, "label")
        return t


def _matching_end(tex: str, i: int) -> int:
    """Where the tabular open before i ends (nested tabulars in cells skipped)."""
    depth = 1
    for m in re.finditer(r"\\(begin|end)\{tabular\}", tex[i:]):
        depth += 1 if m.group(1) == "begin" else -1
        if depth == 0:
            return i + m.start()
    return len(tex)


def _spec_columns(spec: str) -> list[str]:
    """A column spec's columns: l, r, c, or p{...} (with a >{...} prefix, @{} kept out)."""
    out, r = [], _Tex(spec, set())
    prefix = ""
    while r.i < len(spec):
        ch = spec[r.i]
        r.i += 1
        if ch in "lrc":
            out.append(prefix + ch)
            prefix = ""
        elif ch in "pmb":
            out.append(prefix + ch + "{" + r.group() + "}")
            prefix = ""
        elif ch == ">":
            prefix = ">{" + r.group() + "}"
        elif ch == "@":
            r.group()
    return out


def _split_cells(line: str) -> list[str]:
    cells, depth, env, cur = [], 0, 0, []
    i = 0
    while i < len(line):
        if line.startswith(r"\begin{", i):
            env += 1
        elif line.startswith(r"\end{", i):
            env -= 1
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            cur.append(line[i : i + 2])
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "&" and depth == 0 and env == 0:
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    cells.append("".join(cur).strip())
    return cells


def _group_of(cell: str) -> tuple[str, int]:
    m = re.match(r"\\multicolumn\{(\d+)\}\{[^}]*\}", cell)
    if not m:
        return cell, 1
    r = _Tex(cell, set())
    r.i = m.end()
    return r.group(), int(m.group(1))


def _arg_of(tex: str, name: str) -> str:
    i = tex.rfind("\\" + name + "{")
    if i < 0:
        return ""
    r = _Tex(tex, set())
    r.i = i + len(name) + 1
    return r.group()


def write_html(tex_path: Path, html_path: Path, sidecar_path: Path | None = None) -> None:
    """The report's page of a table written as LaTeX only (render_tabular's format)."""
    t = Table.from_latex(Path(tex_path).read_text())
    side = json.loads(Path(sidecar_path).read_text()) if sidecar_path else None
    atomic_write(Path(html_path), t.html(None, side, Path(tex_path).name))


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; max-width: 90em; }}
table {{ border-collapse: collapse; font-size: 0.9em; border-top: 2px solid #333; border-bottom: 2px solid #333; }}
th {{ padding: 0.25em 0.6em; border-bottom: 1px solid #333; font-weight: bold; text-align: center;
      vertical-align: bottom; }}
td {{ padding: 0.2em 0.6em; border-bottom: 1px solid #e4e4e4; white-space: nowrap; vertical-align: top; }}
td.l {{ text-align: left; }} td.r {{ text-align: right; }} td.c {{ text-align: center; }}
td.block {{ border-top: 1px solid #888; }}
td.span {{ max-width: 0; overflow: visible; font-style: italic; }}
.ends {{ display: inline-flex; flex-direction: column; vertical-align: middle; font-size: 70%;
         line-height: 1.05; margin-left: 0.1em; }}
.ends sup, .ends sub {{ vertical-align: baseline; font-size: 100%; }}
small {{ font-size: 80%; }}
p.caption {{ max-width: 60em; }}
pre {{ background: #f6f6f6; padding: 0.8em; white-space: pre-wrap; font-size: 0.8em; }}
</style></head><body>
<h2>{title}</h2>
{table}
<p class="caption">{caption}</p>
<p class="rows">{rows} rows.</p>
{sidecar}
<details><summary>LaTeX source ({name})</summary><pre>{source}</pre></details>
</body></html>
"""
