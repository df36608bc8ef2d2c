"""The dashboard in a real browser (Debian's chromium driven by Playwright): `nox -s browser`."""
