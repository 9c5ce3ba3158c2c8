"""The `client` fixture Queen's client tests expect, for a pgcursor gateway.

Queen's own conftest also wipes its schema (`queen.*`) through asyncpg before
a run; pgcursor has no such schema, and scripts/queen-suite.sh gives every run
a new database instead.
"""

import os

import pytest
from queen import Queen


@pytest.fixture
async def client():
    queen = Queen(os.environ["QUEEN_SERVER_URL"])
    yield queen
    await queen.close()
