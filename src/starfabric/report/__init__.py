"""Report writers: Chrome-trace timelines and self-contained HTML pages with plots."""

from starfabric.report.html import HtmlReport, figure_png
from starfabric.report.trace import ChromeTrace

__all__ = ["ChromeTrace", "HtmlReport", "figure_png"]
