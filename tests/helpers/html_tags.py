"""Parse a rendered report page into its tags and text (shared by the report tests)."""

from html.parser import HTMLParser


class Tags(HTMLParser):
    """Collects tags with their attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> Tags:
    parser = Tags()
    parser.feed(html)
    return parser
