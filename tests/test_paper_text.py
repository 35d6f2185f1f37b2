"""The built paper as a reader sees it (pdftotext of paper/main.pdf): sentences that read as
written text (no "run(s)", no "5 to 5", no repeated qualifiers, no zero-item lists, no undefined
value), an abstract of at most 250 words and a main text, through the conclusion, of at most 16
pages. The text patterns run on the repository's PDF or, without one, on the suite's scratch
pipeline's; the length checks only on the repository's (`make paper`)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from schedlab import config

PDF = config.ROOT / "paper" / "main.pdf"

# each pattern with what it catches; any match in the rendered text is a defect
PATTERNS = {
    r"\w\(s\)": "a plural left to the reader: 'run(s)'",
    r"(?<![\d.,])(\d+(?:\.\d+)?) to \1(?![\d.,])": "a range from a number to itself: '5 to 5'",
    r"(?<![\w.])(not significant|no detectable difference|(?<!not )significant|equivalent)[,;] \1\b": (
        "a repeated qualifier: 'not significant, not significant'"
    ),
    r"\bfrom delay \S+ \S+ to delay": "a variant label used as a number: 'from delay 0 µs to delay 2000 µs'",
    r"\b(other|the) 0 (are|were|is)\b": "a count of nothing: 'the other 0 are'",
    r"\b0 of (the )?0\b": "a count of nothing: '0 of 0'",
    # a zero counted in prose: "0 kick-aways", "0 on neither", "at most 0 of them", "BOOSTed 0 times"
    # (not a number on an axis or an identifier: pCPU 0, sched_ratelimit_us=0, credit < 0 at)
    r"(?<![\w.,=(+\-\u2212\u2013/])(?<!CPU )(?<!vCPU )0 (?!(?:us|ms|ns|s)\b)(?:[a-z][\w-]*s|[A-Z]+s|times|have|has|are|is|were|was|on (?:neither|one|both))\b": (
        "a count of nothing in prose: '0 kick-aways, 0 on neither'"
    ),
    r"\bat most 0 of\b": "a count of nothing: 'at most 0 of them'",
    r"\b(?:reproduce|reject|leave) no claims\b": "a verdict no claim got, listed: 'reproduce no claims'",
    r"for want of records": "a reason that is not one",
    r"\?\?": "an undefined value or reference",
    r"warm-up run\(s\)": "a plural left to the reader",
    # the second review (issue 36)
    r"\bclaims stay untestable under QEMU\b": "the testbed blamed for every untestable claim, whatever the cause",
    r"because an emulated host does not resolve effects": "a reason for untestability that no claim has",
    r"\breject (?:one|two|three|four|five|six|\d+) claims?\b": "'reject' for a verdict that may be fragile",
    r"\bnone among them\b": "a list of nothing: 'several settings of the delay, none among them'",
    r": [^.:;]{1,60}=\S+: ": "a colon-chained verdict: 'reproduced in direction only: netperf throughput mode=corun: ...'",
    r"A non-significant difference here says nothing about equality": "a remark for another outcome",
    r"\bdivides\b.{0,100}?\bby 1\.0(?![\d.])": "a division by 1.0: 'divides ... by 1.0 with the fix'",
    r"[a-z]{2,} [\u2013-]+ [\u2013-]+ (?:of|in|at)\b": "a sentence around a value that does not exist: 'takes - - of'",
    r"no interval on real Xen \(a single boot\)": "a boot count the records contradict",
    r"\b(?:idle for the same share|blocking about as often)\b": "sameness claimed without an equivalence test",
    r"\bunder (?:every variant of \S+ and \S+|both lock flavours) alike\b": "a claim beyond what the benchmark ran",
    r"(?:(?:both|all \w+) are outside our interval|none is inside)[^.;]*; there, \u201cinside the interval\u201d": (
        "a remark on 'inside' where nothing is inside"
    ),
    # a difference with four or more significant digits: '-90.861 %', '+974.3 %', '+1081.0 %'
    r"[+\u2212](?:[1-9]\d\.\d{2,}|[1-9]\d{2,}\.\d+|[1-9]\.\d{3,}) ?%": "a difference past three significant digits",
    r"(?<![\w.])\d+\.0{3,}(?![\d])": "a published value padded with zeros: '78.0000'",
    # the third read (issue 36)
    r"\u2013(?:study|testbed|mutants|out|variant|point|config|resources|sim|host|exploratory)\b": (
        "a command's option printed with an en-dash: '\u2013study' (copied, it fails)"
    ),
    r"given in brackets": "parentheses called brackets",
    r"\(S\d, \d": "a citation number read as a study label: '(S0, 4, 5)'",
}

# a remark that needs its subject in the text: any remark without its subject is a defect
REMARKS = {
    r"An exact sign test over n rounds cannot give": (
        r"exact sign tests?, p =",
        "a sign-test caveat with no sign test",
    ),
}

MAX_ABSTRACT_WORDS = 250
MAX_MAIN_PAGES = 16


def _pages(pdf: Path = PDF) -> list[str]:
    if not pdf.exists() or not shutil.which("pdftotext"):
        pytest.skip("no built paper (make paper) or no pdftotext")
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return text.split("\f")


@pytest.fixture
def any_paper(request) -> Path:
    """The repository's built paper, else the one the suite's scratch pipeline builds (conftest's
    `built`, shared with test_pipeline): the generators' text is checked in `make test` too, on
    the scratch pipeline's smaller data, not only where someone ran `make paper`."""
    if PDF.exists():
        return PDF
    return request.getfixturevalue("built")[0] / "paper" / "main.pdf"


def _flat(text: str) -> str:
    """Lines joined; a word broken at a line's end joined again."""
    text = re.sub(r"-\n\s*", "-", text)
    return re.sub(r"\s+", " ", text)


def find_defects(text: str) -> list[str]:
    flat = _flat(text)
    out = []
    for pattern, what in PATTERNS.items():
        for m in re.finditer(pattern, flat):
            out.append(f"{what}: ...{flat[max(0, m.start() - 40) : m.end() + 40]}...")
    for pattern, (subject, what) in REMARKS.items():
        if (m := re.search(pattern, flat)) and not re.search(subject, flat):
            out.append(f"{what}: ...{flat[max(0, m.start() - 40) : m.end() + 40]}...")
    return out


def test_the_patterns_catch_what_the_review_found():
    for bad in (
        "after 1 discarded warm-up run(s)",
        "with 5 to 5 traced qemu runs",
        "schedlab validate-sim \u2013mutants",
        "at the share of the sweep's settings given in brackets",
        "against the concurrency hazard (S0, 4, 5)",
        "0.0 % and 0.0 % (not significant, not significant)",
        "The other 0 are not measured",
        "from delay 0 µs to delay 2000 µs",
        "for want of records under the current design",
        "the yield is ?? times",
        "there are 0 kick-aways and 0 BOOSTs on re-wake",
        "2 are significant on both testbeds, 0 on one testbed only, 0 on neither",
        "748 yields, 0 polls, 0 kicks",
        "validate fewer scenarios (at most 0 of them)",
        "with the fix it is BOOSTed 0 times",
        "8 sit at calibration points, 0 have a single boot",
        "the fixed rules reproduce no claims, reproduce two claims in direction only",
        # the second review, as the PDF of 5280610 printed it
        "with the boot as the experimental unit, four of the six claims stay untestable under QEMU.",
        "or because an emulated host does not resolve effects of the size the seeds report.",
        "on the model the rules reproduce two claims only in direction and reject three claims.",
        "We run several settings of the delay, none among them (Table 24), and measure",
        "the verdict is reproduced in direction only: netperf throughput mode=corun: the seed gives no size",
        "A non-significant difference here says nothing about equality: the study states no margin",
        "Co-running divides the throughput by 10.9 with the bug (941 against 86 Mbit/s) and by 1.0 with the fix.",
        "real Xen's lock build takes – – of its time at three VMs",
        "The PV lock's and soft affinity's effects have no interval on real Xen (a single boot);",
        "show their vCPUs idle for the same share of the storm",
        "shows the lock guests blocking about as often with the PV lock",
        "made below Xen (Appendix C.1), under every variant of S0 and S2 alike.",
        "and the emulator stalls lock holders itself, under both lock flavours alike; Appendix C.4 says",
        "both are outside our interval in the same direction; there, \u201cinside the interval\u201d mostly means",
        "differs from the fix by \u221290.861 % (interval",
        "overcommit=2: +974.3 % [251.5, 3183.5]",
        "its latency by +1081.0 % ([1071.8, 1090.3] %",
        "alone fixed 941.49 baseline 78.0000",
        "An exact sign test over n rounds cannot give a p below 2^(1-n)",
    ):
        assert find_defects(bad), bad
    for good in (
        "after one discarded warm-up run",
        "from 5 to 50 runs",
        "2.5 to 25",
        "not significant; significant at two VMs",
        "none of the six claims",
        "pinned to pCPU 0 of 4",
        "what pCPU 0 runs",
        "sched_ratelimit_us=0 stock",
        "credit < 0 at accounting",
        "so it excludes 0 exactly where starred",
        "0 (0 boots)",
        "0.0 [−0.32, 0.40] outside",
        "no kick-aways or BOOSTs on re-wake",
        "d0 (delay 0 us)",
        "the rules do not reproduce three claims (two of them fragile)",
        "the verdict is reproduced in direction only: for netperf throughput at mode=corun, the seed",
        "differs by \u221290.9 % (interval [\u221290.875, \u221290.847] %",
        "+970 % [250, 3180]",
        "+0.013 % in latency",
        "sched_ratelimit_us 1000",
        "An exact sign test over n rounds cannot give a p below 2^(1-n); (exact sign test, p = 0.03)",
    ):
        assert not find_defects(good), good


def test_a_counted_set_reads_as_written_text_at_every_count():
    """count_of, which the text's "k of n are significant" sentences use, never writes a count of
    nothing or a verb out of agreement, whatever the records give."""
    from schedlab.report.tables import count_of

    verbs = (("is significant", "are significant"), ("differs significantly", "differ significantly"))
    seen = set()
    for n in range(1, 15):
        for k in range(n + 1):
            for verb in verbs:
                text = count_of(k, n, "comparison", "comparisons", verb, "the table's")
                seen.add(text)
                assert not find_defects(text), text
                assert not re.search(
                    r"\b(?:0|1) of\b|of the table's one\b|comparison are\b|\bone of [^.]* are\b", text
                ), text
    assert "none of the table's twelve comparisons is significant" in seen
    assert "one of the table's twelve comparisons is significant" in seen
    assert "both of the table's comparisons are significant" in seen
    assert "neither of the table's comparisons is significant" in seen
    assert "the table's only comparison does not differ significantly" in seen


def test_untestable_comparisons_are_not_counted_as_not_significant():
    """A comparison with too few boots has no test: the text counts it apart ("untestable"), never
    among those that are not significant."""
    import pandas as pd

    from schedlab.report.notebook import significance_phrase

    def cmp(tests, sig):
        return pd.DataFrame({"test": tests, "significant": sig})

    assert significance_phrase(cmp(["untestable"] * 12, [False] * 12)) == (
        "all the table's twelve comparisons are untestable (fewer than five boots in a variant)"
    )
    assert significance_phrase(cmp(["welch"] * 3 + ["untestable"], [True, False, False, False])) == (
        "one of the table's three tested comparisons is significant, and one more is untestable "
        "(fewer than five boots in a variant)"
    )
    assert significance_phrase(
        cmp(["welch"] * 2, [False, False]), "benchmark comparison", "benchmark comparisons", "the"
    ) == ("neither of the benchmark comparisons is significant")
    for text in (
        significance_phrase(cmp(["untestable"], [False])),
        significance_phrase(cmp(["welch"] * 5, [True] * 5), owner="the"),
    ):
        assert not find_defects(text) and "the the" not in text, text


def test_the_rendered_paper_reads_as_written_text(any_paper):
    found = find_defects("\n".join(_pages(any_paper)))
    assert not found, found[:8]


def abstract_words(first_page: str) -> int:
    flat = _flat(first_page)
    start = flat.index("Abstract") + len("Abstract")
    end = re.search(r"\b1 Introduction\b", flat).start()
    return len(flat[start:end].split())


def main_text_pages(pages: list[str]) -> int:
    """The page the conclusion ends on: the one the references start on (the conclusion is the
    main text's last section, the references follow it)."""
    for i, page in enumerate(pages, 1):
        if re.search(r"^\s*References\s*$", page, re.M):
            return i
    raise AssertionError("no References heading in the PDF")


def test_abstract_and_main_text_fit():
    pages = _pages()
    assert abstract_words(pages[0]) <= MAX_ABSTRACT_WORDS, abstract_words(pages[0])
    assert main_text_pages(pages) <= MAX_MAIN_PAGES, main_text_pages(pages)
