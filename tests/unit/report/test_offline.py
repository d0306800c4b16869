"""What counts as a resource fetched from the network, and what does not."""

from __future__ import annotations

from tunegate.report.offline import remote_resources


def test_remote_scripts_styles_images_and_frames_are_found() -> None:
    html = ('<script src="https://cdn.example/p.js"></script>'
            '<link rel="stylesheet" href="http://cdn.example/s.css">'
            '<img src="//cdn.example/i.png"><iframe src="ws://h/x"></iframe>'
            '<img srcset="data:image/png;base64,AA 1x, https://h/big.png 2x">')
    assert len(remote_resources(html)) == 5


def test_remote_urls_in_styles_are_found() -> None:
    html = ('<style>@import "https://fonts.example/f.css"; .a{background:url(http://h/b.png)}'
            '</style><div style="background: url(\'//h/c.png\')"></div>')
    assert remote_resources(html) == ["css 'https://fonts.example/f.css'",
                                      "css 'http://h/b.png'", "css '//h/c.png'"]


def test_inline_data_links_and_script_text_are_not_requests() -> None:
    html = ('<a href="https://docs.example/">docs</a>'
            '<img src="data:image/png;base64,AAAA"><style>.a{background:url(data:x)}</style>'
            '<script>var u = "https://cdn.plot.ly/"; // a string, never fetched</script>'
            '<img src="relative.png">')
    assert remote_resources(html) == []
