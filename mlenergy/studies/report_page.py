"""The parts both study reports share: an HTML table, the page around it, an atomic write.

A report folder holds ``summary.md``, ``summary.csv``, ``index.html`` and the figures it
names; :func:`publish_report` writes them into a hidden folder first and moves them into
place only when all are written, so a failed run never leaves a half-written report.
"""

from __future__ import annotations

import html
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def html_table(header: list[str], rows: list[list[str]], table_id: str) -> str:
    """Render an escaped HTML table (``None.`` in a paragraph when there are no rows)."""
    if not rows:
        return f'<p id="{table_id}">None.</p>'
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def html_page(title: str, css: str, body: list[str], figures: list[str]) -> str:
    """Render a report page: ``body`` (HTML lines), then a ``Figures`` section of images.

    Args:
        title: The page title (escaped).
        css: The page's style sheet.
        body: HTML lines between ``<body>`` and the figures.
        figures: Image file names, relative to the page.
    """
    page = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        f"<style>{css}</style></head><body>",
        *body,
        "<h2>Figures</h2>",
        *[f"<p><img src='{f}' alt='{f}'></p>" for f in figures],
        "</body></html>",
    ]
    return "\n".join(page)


def publish_report(report_dir: Path, write: Callable[[Path], list[str]]) -> Path:
    """Write a report with ``write`` into a scratch folder, then move its files into place.

    Args:
        report_dir: The report folder (created if missing).
        write: Writes the report's files into the folder it is given and returns their
            names (``index.html`` among them).

    Returns:
        Path of ``index.html`` in ``report_dir``.
    """
    report_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=report_dir))
    try:
        for name in write(tmp):
            os.replace(tmp / name, report_dir / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report_dir / "index.html"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table (``|`` in cells escaped)."""

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


Section = tuple[str, str, list[str], list[list[str]]]
"""A report table: ``(title, html id, header, rows)``."""


@dataclass
class StudyReport:
    """One study report, as both studies (toy and measured) write it.

    Attributes:
        title: The page's and the summary's heading.
        notes: ``(html id, text)`` notes shown first (energy source, quality, sampling...).
        meta: What was run (one paragraph).
        link: ``(html id, href, markdown target, text)`` of the companion study's report, or
            ``None`` when that report does not exist (then ``missing_link`` is shown).
        sections: The tables, in order.
        conclusion: The conclusion's paragraphs.
        warnings: Listed warnings (``None``: the report has no warnings section).
        conclusion_first: Put the conclusion above the tables (else after them).
        keep_empty: Show empty tables as "None." (else leave out all but the first).
        css: The page's style sheet.
        missing_link: ``(html id, text)`` saying how to make the companion report, shown
            when ``link`` is ``None``.
    """

    title: str
    notes: list[tuple[str, str]]
    meta: str
    link: tuple[str, str, str, str] | None
    sections: list[Section]
    conclusion: list[str]
    warnings: list[str] | None = None
    conclusion_first: bool = False
    keep_empty: bool = True
    css: str = ""
    extra_md: list[str] = field(default_factory=list)
    missing_link: tuple[str, str] | None = None

    def _shown(self) -> list[Section]:
        return [s for i, s in enumerate(self.sections) if self.keep_empty or s[3] or i == 0]

    def _link_md(self) -> list[str]:
        if self.link is not None:
            _, _, target, text = self.link
            return [f"{text}: {target}", ""]
        return [self.missing_link[1], ""] if self.missing_link else []

    def _link_html(self) -> list[str]:
        if self.link is not None:
            link_id, href, _, text = self.link
            return [f"<p>See also the <a id='{link_id}' href='{href}'>{html.escape(text)}</a>.</p>"]
        if self.missing_link is None:
            return []
        link_id, text = self.missing_link
        return [f"<p id='{link_id}'>{html.escape(text)}</p>"]

    def markdown(self) -> str:
        """``summary.md``."""
        md = [f"# {self.title}", ""]
        for _, note in self.notes:
            md += [f"> {note}", ""]
        md += [self.meta, "", *self._link_md(), *self.extra_md]
        conclusion = ["## Conclusion", "", *[p + "\n" for p in self.conclusion]]
        if self.conclusion_first:
            md += conclusion
        for title, _, header, cells in self._shown():
            md += [f"## {title}", "", markdown_table(header, cells) if cells else "None.", ""]
        if self.warnings is not None:
            md += ["## Warnings", "", *[f"- {w}" for w in self.warnings], ""]
        if not self.conclusion_first:
            md += conclusion
        return "\n".join(md)

    def html(self, figures: list[str]) -> str:
        """``index.html`` with ``figures`` (file names) at the end."""
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        body += [f"<p class='note' id='{nid}'>{html.escape(note)}</p>" for nid, note in self.notes]
        body += [f"<p>{html.escape(self.meta)}</p>", *self._link_html()]
        conclusion = ["<h2>Conclusion</h2>", *[f"<p>{html.escape(p)}</p>" for p in self.conclusion]]
        if self.conclusion_first:
            body += conclusion
        for title, table_id, header, cells in self._shown():
            body += [f"<h2>{html.escape(title)}</h2>", html_table(header, cells, table_id)]
        if self.warnings is not None:
            body += ["<h2>Warnings</h2>", "<ul class='warn' id='warnings'>"]
            body += [f"<li>{html.escape(w)}</li>" for w in self.warnings] or ["<li>None.</li>"]
            body += ["</ul>"]
        if not self.conclusion_first:
            body += conclusion
        return html_page(self.title, self.css, body, figures)

    def publish(
        self,
        report_dir: Path,
        write_figures: Callable[[Path], list[str]],
        summary_csv: Callable[[Path], None],
        extra_files: Callable[[Path], list[str]] | None = None,
    ) -> Path:
        """Write the report's files atomically.

        Figures, ``summary.csv``, the files ``extra_files`` writes (it returns their names),
        ``summary.md`` and ``index.html``.
        """

        def write(tmp: Path) -> list[str]:
            figures = write_figures(tmp)
            summary_csv(tmp / "summary.csv")
            extra = extra_files(tmp) if extra_files is not None else []
            (tmp / "summary.md").write_text(self.markdown(), encoding="utf-8")
            (tmp / "index.html").write_text(self.html(figures), encoding="utf-8")
            return [*figures, *extra, "summary.md", "summary.csv", "index.html"]

        return publish_report(report_dir, write)
