"""The Debian base (images/base.py): the host's mirror it uses and the key it is cached by."""

from __future__ import annotations

import textwrap

from memorystore_dev.devcluster.images import ImageBuilder, base


def test_the_mirror_is_the_hosts_main_suite_not_security(tmp_path):
    sources = tmp_path / "debian.sources"
    sources.write_text(
        textwrap.dedent(
            """\
            Types: deb
            URIs: http://security.example/debian-security
            Suites: bookworm-security
            Components: main

            Types: deb
            # a comment line
            URIs: http://mirror.example/debian
            Suites: bookworm bookworm-updates
            Components: main
            """
        )
    )
    assert base.host_mirror(sources) == "http://mirror.example/debian"
    assert base.host_mirror(tmp_path / "absent") == base.DEFAULT_MIRROR


def test_the_base_key_follows_suite_mirror_and_variant(tmp_path):
    def key(**kw: str) -> str:
        return ImageBuilder(cache=tmp_path, **kw).base_key()

    first = key(suite="bookworm", mirror="http://a/debian", variant="minbase")
    assert first == key(suite="bookworm", mirror="http://a/debian", variant="minbase")
    assert first != key(suite="trixie", mirror="http://a/debian", variant="minbase")
    assert first != key(suite="bookworm", mirror="http://b/debian", variant="minbase")
    assert first != key(suite="bookworm", mirror="http://a/debian", variant="buildd")
    tag = ImageBuilder(cache=tmp_path, suite="bookworm", mirror="http://a/debian").base_tag()
    assert tag == f"memorystore-base/debian:bookworm-minbase-{first}"
