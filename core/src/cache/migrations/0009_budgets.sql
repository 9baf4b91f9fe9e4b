-- Budgets and what keeping them did. A person caps what an agent, a person or a team spends
-- in a day, a week or a month (UTC); `budget_actions` records, per budget and period, the
-- warning at 80 % and each agent paused at 100 %, so each is done once a period however
-- often the figures are looked at (a person who resumes a paused agent is not overruled
-- until the budget is set again). Controls keep the reason they gave ("budget reached").
CREATE TABLE budgets (
    scope  TEXT NOT NULL CHECK (scope IN ('agent', 'person', 'team')),
    name   TEXT NOT NULL,
    period TEXT NOT NULL CHECK (period IN ('day', 'week', 'month')),
    usd    REAL NOT NULL CHECK (usd > 0),
    set_ms INTEGER NOT NULL,
    PRIMARY KEY (scope, name, period)
) STRICT;

CREATE TABLE budget_actions (
    scope        TEXT NOT NULL,
    name         TEXT NOT NULL,
    period       TEXT NOT NULL,
    -- The first UTC day of the period the action was for.
    period_start TEXT NOT NULL,
    -- 'near' (80 %) or 'reached' (100 %).
    level        TEXT NOT NULL,
    -- The agent paused; '' for the warning and for a budget reached with no agent of ours
    -- to pause.
    agent        TEXT NOT NULL,
    spent_usd    REAL NOT NULL,
    budget_usd   REAL NOT NULL,
    -- What the person is told.
    text         TEXT NOT NULL,
    ts_ms        INTEGER NOT NULL,
    PRIMARY KEY (scope, name, period, period_start, level, agent)
) STRICT;

ALTER TABLE controls ADD COLUMN reason TEXT;
ALTER TABLE issued_controls ADD COLUMN reason TEXT;
