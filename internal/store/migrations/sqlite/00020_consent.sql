-- Consent. A grant gives access at once, but the agent becomes a
-- delegation target for the grantee's runs only once they accept it:
-- grants gain accepted, 0 for every grant made before (nobody was asked,
-- so nobody consented). Agents gain library, whether the shared library is
-- searched for them: off for new agents, on for the agents that existed,
-- which searched it until now.

-- +goose Up
ALTER TABLE grants ADD COLUMN accepted INTEGER NOT NULL DEFAULT 0 CHECK (accepted IN (0, 1));
ALTER TABLE agents ADD COLUMN library INTEGER NOT NULL DEFAULT 0 CHECK (library IN (0, 1));
UPDATE agents SET library = 1;

-- +goose Down
ALTER TABLE agents DROP COLUMN library;
ALTER TABLE grants DROP COLUMN accepted;
