// The API's shapes, under the names the app uses: aliases over api.gen.ts,
// which openapi-typescript generates from internal/api/openapi.json, which
// is generated from the server's code (`make openapi` regenerates both;
// `npm run check:api` fails when api.gen.ts is stale). Change the server,
// not this file, to change a shape.

import type { components } from './api.gen'

export type Schemas = components['schemas']

export type User = Schemas['User']
export type UserRef = Schemas['UserRef']
export type Contact = Schemas['Contact']
export type Policy = Schemas['Policy']
export type Limits = Schemas['Limits']
export type Budget = Schemas['Budget']

export type Agent = Schemas['Agent']
/** The caller's level on an agent. */
export type Level = Agent['access']
export type GrantLevel = Schemas['Grant']['level']
export type LinkLevel = Schemas['Link']['level']
export type AgentState = Agent['state']
/** What runs an agent: `builtin` is Corral's own loop; the others are an agent CLI in the run's sandbox. */
export type Driver = Agent['driver']
/**
 * What the caller may do to an agent (`agent.can`): the actions of the
 * server's access policy that the caller's level allows, as the server
 * decides them.
 */
export type Can = Schemas['Can']
export type Action = Can[number]

/** The body of POST /api/agents and PATCH /api/agents/{id}: every field optional. */
export type AgentRequest = Schemas['AgentRequest']
export type Grant = Schemas['Grant']
export type Link = Schemas['Link']
export type Message = Schemas['Message']
/** A document an assistant answer drew on (a message's `sources`). */
export type MessageSource = Schemas['Source']

export type Run = Schemas['Run']
export type RunStatus = Run['status']
/** What ran a run: an agent's driver, or `terminal` (a person at the run's terminal, no model). */
export type RunDriver = Run['driver']
export type PostedMessage = Schemas['PostedMessage']
export type TraceEvent = Schemas['TraceEvent']
export type TraceType = TraceEvent['type']

export type ChangeEntry = Schemas['ChangeEntry']
export type ChangeSet = Schemas['ChangeSet']
export type ChangeClass = ChangeEntry['class']
/** A set stays `pending` while any of its entries is pending, also after a partial decision. */
export type ChangeStatus = ChangeSet['status']
export type ChangeFlag = ChangeEntry['flags'][number]
export type ChangeEntryState = ChangeEntry['state']
/** A change set waiting for the caller's decision, as the inbox (GET /api/changes?status=pending) lists it. */
export type WaitingChangeSet = Schemas['WaitingChangeSet']

export type WorkspaceFile = Schemas['File']
export type FileEntry = NonNullable<WorkspaceFile['entries']>[number]
/** The answer of POST /api/agents/{id}/workspace/import. */
export type ImportResult = Schemas['Import']

export interface Items<T> {
  items: T[]
}

/** An agent's git repository: its workspace is the clone. */
export type Repository = Schemas['Repository']
export type RepositoryStatus = Repository['status']
/** The body of PUT /api/agents/{id}/repository. */
export type RepositoryRequest = Schemas['RepositoryRequest']
export type Commit = Schemas['Commit']
export type PushResult = Schemas['PushResult']
export type SyncResult = Schemas['SyncResult']

/** A code-host credential as the API answers it: never its secret. */
export type Credential = Schemas['Credential']
export type CredentialRequest = Schemas['CredentialRequest']

/**
 * A document as GET /api/agents/{id}/documents and /api/library/documents
 * answer it (the API's `Document`; named Doc here because the DOM has a
 * Document type of its own).
 */
export type Doc = Schemas['Document']
/** Where a document lives: one agent's private store, or the shared library every agent may draw from. */
export type DocumentSource = Doc['source']
/** One passage POST /api/agents/{id}/search found. */
export type SearchHit = Schemas['Passage']
/** The answer of POST /api/agents/{id}/search. */
export type SearchResult = Schemas['Retrieval']

/** GET /api/setup: whether the server is brand new (the first account administers it), and how people sign up. */
export type Setup = Schemas['Setup']
/** GET /api/models: what an agent's model may be set to: the server's default first, then the others the provider lists. */
export type ModelList = Schemas['Models']
/** GET /api/limits: an agent's limits when left 0 (null: no limit), and the most each may be. */
export type LimitsInfo = Schemas['LimitsInfo']

// The administrators' page.
export type ListedUser = Schemas['ListedUser']
export type Invite = Schemas['Invite']
export type NodeInfo = Schemas['Node']
export type Usage = Schemas['Usage']
export type UsageGroupBy = Usage['group_by']
export type UsageGroup = Schemas['UsageGroup']
export type RunInFlight = Schemas['RunInFlight']
export type AgentBudget = Schemas['AgentBudget']
