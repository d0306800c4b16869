"""Databases tunegate shares between machines: the URL of a shared study or lease, and the
SQLAlchemy engine options that keep an outage short and visible."""

from tunegate.database.urls import (
    bound_statements,
    engine_options,
    is_postgresql,
    sqlalchemy_url,
)

__all__ = ["bound_statements", "engine_options", "is_postgresql", "sqlalchemy_url"]
