"""Which Redmine a URL points at: its host as a browser resolves it.

A retrieved chunk's ``url`` (or a source URI that is a Redmine issue URL) says where the knowledge base's
Redmine is. A Redmine URL in an answer must point there: ``https://redmine.examp1e.com/issues/12345`` names a
retrieved ticket but leads elsewhere. Hosts are compared as a browser resolves them (``url_host``): case,
an internationalised name and its punycode form (``レッドマイン.example`` is ``xn--eck1csa8f1c2b.example``),
full-width letters, a final dot, a port and ``user@`` before the host make no difference; any other
character does (a Cyrillic ``е`` for a Latin ``e``, ``ß`` for ``ss``: browsers resolve those to other hosts,
IDNA 2008 with UTS #46 processing, not the transitional mapping of IDNA 2003).

Pure: nothing is fetched or resolved, only the text of the URL is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from urllib.parse import unquote

from anchorkit.verify.folding import fold
from anchorkit.verify.ids import redmine_issue_id

# A URL up to its host (read in the folded view, where "ｈｔｔｐｓ：／／" is "https://"): its scheme, any number
# of "/" or "\" after it (a browser reads "\" as "/" in a web URL), "user@", then the host up to its port,
# path, query or fragment; or the host of a URL without its scheme ("host/issues/5").
# A link relative to the Redmine's own pages ("/issues/5", "issues/5"): on the host the answer is about.
_RELATIVE = re.compile(r"/|(?i:issues)/")
# A URL that says its scheme: its host starts right after it, and is read whole.
_SCHEME = re.compile(r"(?i:https?):")
_BEFORE_HOST = re.compile(r"(?:(?i:https?):[/\\]*)?(?:[^/\\?#]*@)?(?P<host>\[[^\]/\\?#]*\]|[^:/\\?#]*)")


def url_host(url: str) -> str | None:
    """The host a browser contacts for ``url`` (a web URL, or a URL without its scheme), in one form for
    comparing: lower case, punycode for what is not ASCII, without ``user@``, port or final dot. None when
    no browser could resolve it (IDNA refuses it) or it has none.

    The URL's parts are found in its folded view, the host itself read from the URL as written: a browser
    composes a combining mark with the letter before it (``exa`` U+0308 ``mple`` is ``exämple``, another
    host), where the folded view drops it."""
    view = fold(url)
    found = _BEFORE_HOST.match(view.text)
    assert found is not None  # every part may be empty
    host = unquote(url[view.start(found.start("host")) : view.end(found.end("host"))])
    if not host.isascii():
        import idna  # lazily: the Lambda, which imports verify for its ids, never compares hosts

        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except idna.IDNAError:
            return None
    return host.rstrip(".").lower() or None


def redmine_hosts(urls: Iterable[str]) -> frozenset[str]:
    """The hosts of ``urls`` (the retrieved chunks' Redmine URLs) that a browser could resolve."""
    return frozenset(host for url in urls if (host := url_host(url)) is not None)


def leads_elsewhere(url: str, hosts: Set[str]) -> bool:
    """Whether ``url`` (as written, any width) is a Redmine issue URL on another host than every one of
    ``hosts`` (the retrieval's Redmine): it leads to no retrieved ticket, whatever its number. False when
    no host is known (the retrieval does not say where its Redmine is)."""
    if not hosts or redmine_issue_id(fold(url).text) is None:
        return False
    host = url_host(url)
    if host in hosts or _RELATIVE.match(fold(url).text) is not None:
        return False
    return not (host is not None and _SCHEME.match(fold(url).text) is None and _glued_to_prose(host, hosts))


def _glued_to_prose(host: str, hosts: Set[str]) -> bool:
    """Whether ``host``, read from a URL without its scheme, is one of ``hosts`` with prose glued before it
    ("詳細はレッドマイン.example"): Japanese writes no space before a URL, and nothing says where such a host
    starts but the Redmine's own name at its end. A name before a dot ("evil.レッドマイン.example") is another host."""
    import idna

    try:
        written = str(idna.decode(host))
    except idna.IDNAError:
        return False
    for known in hosts:
        try:
            name = str(idna.decode(known))
        except idna.IDNAError:
            continue
        before = written[: -len(name)]
        if written.endswith(name) and before and not before[-1].isascii():
            return True
    return False


def shown_hosts(hosts: Iterable[str]) -> str:
    """Hosts for people, as they read them (``レッドマイン.example``, not its punycode)."""
    import idna

    def readable(host: str) -> str:
        try:
            return str(idna.decode(host))
        except idna.IDNAError:
            return host

    return ", ".join(sorted(readable(host) for host in hosts))
