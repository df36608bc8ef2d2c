"""The recipe sections of what a job reports and is checked against: reporting and identity."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from srtd.recipe._base import Name, Rules, Section, StrMap, StrSeq


class IdentityModelConfig(Section):
    """The model that should be running."""

    repo: str | None = None
    """Hugging Face repo id."""
    revision: str | None = None
    """Commit SHA of the repo."""


class IdentityContainerConfig(Section):
    """The container that should be running."""

    image: str | None = None
    """Image URI."""


class IdentityConfig(Section):
    """What should be running, checked against the workers' fingerprints."""

    model: IdentityModelConfig = Field(default_factory=IdentityModelConfig)
    """Expected model."""
    container: IdentityContainerConfig = Field(default_factory=IdentityContainerConfig)
    """Expected container."""
    frameworks: StrMap = {}
    """Package -> expected version."""


class ReportingStatusConfig(Section):
    """Status collectors that receive lifecycle events."""

    endpoint: str | None = None
    """One collector base URL."""
    endpoints: StrSeq | None = None
    """Several collectors."""
    token_env: str | None = None
    """Name of the environment variable that holds the bearer token (default SRTCTL_STATUS_TOKEN)."""
    job_id_prefix: str | None = None
    """Prepended to the job id the collectors see (`cluster-a:`), so jobs of several clusters stay apart."""
    logging_stream_interval: float | None = Field(default=None, alias="logging-stream-interval")
    """Seconds between raw-log uploads; accepted, not acted on yet."""
    units: bool | None = None
    """Also send every journal event to `srtd collector`'s extension route: unset, to each collector whose
    `/api/health` says it takes them (an srtd collector); `true`, to every collector; `false`, to none."""

    @model_validator(mode="after")
    def _rules(self) -> ReportingStatusConfig:
        rules = Rules()
        if self.endpoint is not None and not _is_http_url(self.endpoint):
            rules.add("endpoint", f"must be an http:// or https:// URL, got {self.endpoint!r}")
        for i, endpoint in enumerate(self.endpoints or ()):
            if not _is_http_url(endpoint):
                rules.add(f"endpoints.{i}", f"must be an http:// or https:// URL, got {endpoint!r}")
        if self.token_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.token_env):
            rules.add("token_env", "must be the name of an environment variable (the token itself stays out of files)")
        rules.check()
        return self


def _is_http_url(text: str) -> bool:
    scheme, _, rest = text.partition("://")
    return scheme in ("http", "https") and bool(rest.strip("/")) and not any(c.isspace() for c in text)


def _no_literal_secret(rules: Rules, section: Section, fields: dict[str, str]) -> None:
    # Tokens come only from the environment: a literal one would land in plans,
    # journals and copied recipes.
    for field, variable in fields.items():
        if getattr(section, field) is not None:
            rules.add(field, f"secrets are not accepted in a recipe; set ${variable} in the environment")


class AIAnalysisConfig(Section):
    """Failure analysis after a failed job."""

    enabled: bool = False
    """Run the analysis."""
    openrouter_api_key: str | None = None
    """Refused: set OPENROUTER_API_KEY in the environment."""
    gh_token: str | None = None
    """Refused: set GH_TOKEN in the environment."""
    repos_to_search: StrSeq = ()
    """Repositories searched for related changes."""
    pr_search_days: int = 14
    """Days to look back."""
    prompt: str | None = None
    """Prompt template."""

    @model_validator(mode="after")
    def _secrets(self) -> AIAnalysisConfig:
        rules = Rules()
        _no_literal_secret(rules, self, {"openrouter_api_key": "OPENROUTER_API_KEY", "gh_token": "GH_TOKEN"})
        rules.check()
        return self


class S3Config(Section):
    """Upload of the log directory to S3-compatible storage."""

    bucket: str | None = None
    """Bucket name (the job's or the cluster's `reporting.s3` must name one)."""
    prefix: str | None = None
    """Prefix within the bucket (default `srtslurm`): logs go to `<prefix>/<YYYY-MM-DD>/<job id>/`."""
    region: str | None = None
    """Region."""
    endpoint_url: str | None = None
    """S3-compatible endpoint."""
    access_key_id: str | None = None
    """Refused: set AWS_ACCESS_KEY_ID in the environment."""
    secret_access_key: str | None = None
    """Refused: set AWS_SECRET_ACCESS_KEY in the environment."""
    exclude: StrSeq | None = None
    """Patterns `aws s3 sync` leaves out, relative to the log directory; unset: srt-slurm's defaults, `[]`: none."""
    archive: StrSeq | None = None
    """Patterns (Python globs) packed into one archive uploaded next to the logs; unset: srt-slurm's defaults."""

    @model_validator(mode="after")
    def _secrets(self) -> S3Config:
        rules = Rules()
        _no_literal_secret(
            rules, self, {"access_key_id": "AWS_ACCESS_KEY_ID", "secret_access_key": "AWS_SECRET_ACCESS_KEY"}
        )
        rules.check()
        return self


class PublisherConfig(Section):
    """A command that publishes the job's checked results (docs/results.md, "Publishing results")."""

    name: Name
    """Unique label; names its log (`publish_<name>.out`) and its journal event."""
    command: StrSeq
    """Argv run on srtd's host after the job, never shell-interpreted; the results arrive as JSON on stdin."""
    timeout_seconds: float = 60.0
    """Killed (and counted as failed) after this long."""

    @model_validator(mode="after")
    def _rules(self) -> PublisherConfig:
        rules = Rules()
        rules.argv("command", self.command)
        if self.timeout_seconds <= 0:
            rules.add("timeout_seconds", f"must be more than 0, got {self.timeout_seconds:g}")
        rules.check()
        return self


class ReportingConfig(Section):
    """Status reporting, failure analysis, log upload, result publishers."""

    status: ReportingStatusConfig | None = None
    """Status collectors."""
    ai_analysis: AIAnalysisConfig | None = None
    """Failure analysis."""
    s3: S3Config | None = None
    """Log upload."""
    publishers: tuple[PublisherConfig, ...] = ()
    """Commands run after a job whose results passed the results gate, one after another."""

    @model_validator(mode="after")
    def _unique_publishers(self) -> ReportingConfig:
        rules = Rules()
        seen: set[str] = set()
        for i, publisher in enumerate(self.publishers):
            if publisher.name in seen:
                rules.add(f"publishers.{i}.name", f"{publisher.name!r} is used by an earlier publisher")
            seen.add(publisher.name)
        rules.check()
        return self
