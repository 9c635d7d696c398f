// The repository tab: the git repository an agent's workspace is a clone
// of, the clone's progress while it runs (polled, every request bounded),
// the commits that applied change sets made (each linked to its change
// set), and for editors and owners a sync with the branch upstream (a
// fast-forward, or Corral's commits rebased onto it; a conflict is refused
// naming its paths) and a push of those commits to a branch. A sync or a
// push uses the credential of the agent's owner; the server finds it.

import { useEffect, useState, type FormEvent } from 'react'
import { api } from './api'
import { isNotFound } from './errors'
import { ErrorText, Loading, useLoad } from './feedback'
import { Field } from './Field'
import { formatTime, shortId } from './format'
import { poll, type PollOptions } from './poll'
import { Link } from './router'
import type { Agent, Commit, PushResult, Repository, RepositoryRequest, SyncResult } from './types'

/** How the clone is followed: every second, each request cut at 10 s, for at most an hour. */
export const clonePoll = { intervalMs: 1000, timeoutMs: 10_000, deadlineMs: 60 * 60 * 1000 }

/** The fields of a clone: URL, optional ref, optional credential from the caller's list. */
export function RepositoryFields({ value, onChange }: { value: RepositoryRequest; onChange: (v: RepositoryRequest) => void }) {
  const creds = useLoad(() => api.credentials(), [])
  return (
    <>
      <Field label="Repository URL" hint="An https:// address, as you would give git clone.">
        {(p) => (
          <input
            {...p}
            type="url"
            required
            placeholder="https://git.example.com/team/project.git"
            value={value.url}
            onChange={(e) => onChange({ ...value, url: e.target.value })}
          />
        )}
      </Field>
      <Field label="Ref (optional)" hint="A branch or tag; empty for the repository's default branch.">
        {(p) => <input {...p} value={value.ref ?? ''} onChange={(e) => onChange({ ...value, ref: e.target.value })} />}
      </Field>
      <Field
        label="Credential"
        hint={
          <>
            For a private repository: one that names it. <Link to="/credentials">Manage your credentials</Link>.
          </>
        }
      >
        {(p) => (
          <select {...p} value={value.credential_id ?? ''} onChange={(e) => onChange({ ...value, credential_id: e.target.value })}>
            <option value="">None: a public repository</option>
            {(creds.data ?? []).map((c) => (
              <option key={c.id} value={c.id}>
                {c.name} ({c.username}@{c.host}: {c.repositories.length ? c.repositories.join(', ') : 'no repository'})
              </option>
            ))}
          </select>
        )}
      </Field>
      <ErrorText error={creds.error} />
    </>
  )
}

/** The request body without empty optional fields. */
export function cloneRequest(v: RepositoryRequest): RepositoryRequest {
  const body: RepositoryRequest = { url: v.url.trim() }
  if (v.ref?.trim()) body.ref = v.ref.trim()
  if (v.credential_id) body.credential_id = v.credential_id
  return body
}

/** The clone's status; a progress bar while cloning, the server's words when it failed. */
export function CloneStatus({ repo }: { repo: Repository }) {
  return (
    <div className="clone-status">
      <p>
        Status: <strong title={`Status: ${repo.status}`}>{repo.status}</strong>
      </p>
      {repo.status === 'cloning' && (
        <div className="upload-progress">
          <progress aria-label="Clone progress" max={100} value={repo.progress ?? undefined} />
          <span role="status">{repo.progress !== undefined ? `${Math.round(repo.progress)}%` : 'Starting…'}</span>
        </div>
      )}
      {(repo.status === 'failed' || repo.error) && (
        <p role="alert" className="error">
          {repo.error || 'The clone failed.'}
        </p>
      )}
    </div>
  )
}

function CloneForm({ agentId, onStarted }: { agentId: string; onStarted: (r: Repository) => void }) {
  const [v, setV] = useState<RepositoryRequest>({ url: '', ref: '', credential_id: '' })
  const [error, setError] = useState<unknown>()
  const [busy, setBusy] = useState(false)
  async function submit(e: FormEvent) {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      onStarted(await api.setRepository(agentId, cloneRequest(v)))
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form onSubmit={submit} className="stack">
      <p className="muted">Clone a git repository into this agent's workspace (it must be empty).</p>
      <RepositoryFields value={v} onChange={setV} />
      <ErrorText error={error} />
      <div>
        <button type="submit" disabled={busy || v.url.trim() === ''}>
          Clone
        </button>
      </div>
    </form>
  )
}

/** What a sync did, in words. */
export function syncSummary(r: SyncResult): string {
  const head = r.head.slice(0, 12)
  let done: string
  switch (r.status) {
    case 'up_to_date':
      done = `Already up to date: the workspace holds upstream's ${r.upstream.slice(0, 12)}.`
      break
    case 'fast_forward':
      done = `Fast-forwarded to upstream's ${head}.`
      break
    default:
      done = `Rebased ${r.rebased} ${r.rebased === 1 ? 'commit' : 'commits'} onto upstream's ${r.upstream.slice(0, 12)}; the head is now ${head}.`
  }
  const n = r.pending?.length ?? 0
  if (n === 0) return done
  return `${done} ${n === 1 ? 'A change set waits' : `${n} change sets wait`} for review: a file the sync changed is conflicted when it is decided.`
}

function SyncForm({ agentId, branch, onSynced }: { agentId: string; branch: string; onSynced: () => void }) {
  const [error, setError] = useState<unknown>()
  const [result, setResult] = useState<SyncResult>()
  const [busy, setBusy] = useState(false)
  async function sync() {
    setBusy(true)
    setError(undefined)
    setResult(undefined)
    try {
      setResult(await api.sync(agentId))
      onSynced()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return (
    <div className="stack sync" role="group" aria-labelledby="sync-heading">
      <h3 id="sync-heading">Sync</h3>
      <p className="muted">
        Brings the workspace to {branch} upstream: a fast-forward, or the workspace's own commits rebased onto it. Not while a run is active;
        a conflict changes nothing.
      </p>
      <ErrorText error={error} />
      {result && (
        <p role="status" className="ok">
          {syncSummary(result)}
        </p>
      )}
      <div>
        <button type="button" onClick={() => void sync()} disabled={busy}>
          Sync with upstream
        </button>
      </div>
    </div>
  )
}

// PushForm pushes to the branch named, or to the one the server suggests
// for the agent when none is; after a push to a host whose pages it
// knows, it links to where a pull request is opened.
function PushForm({ agentId, suggested, onPushed }: { agentId: string; suggested: string; onPushed: () => void }) {
  const [branch, setBranch] = useState('')
  const [error, setError] = useState<unknown>()
  const [result, setResult] = useState<PushResult>()
  const [busy, setBusy] = useState(false)
  async function submit(e: FormEvent) {
    e.preventDefault()
    if (branch.trim() === '' && suggested === '') return
    setBusy(true)
    setError(undefined)
    setResult(undefined)
    try {
      setResult(await api.push(agentId, branch.trim()))
      onPushed()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return (
    <form onSubmit={submit} className="stack push" aria-labelledby="push-heading">
      <h3 id="push-heading">Push</h3>
      <p className="muted">Pushes the commits applied change sets made, with the owner's credential.</p>
      <Field label="Branch" hint={suggested ? `Empty: ${suggested}.` : undefined}>
        {(p) => (
          <input {...p} required={suggested === ''} placeholder={suggested} value={branch} onChange={(e) => setBranch(e.target.value)} />
        )}
      </Field>
      <ErrorText error={error} />
      {result && (
        <p role="status" className="ok">
          Pushed {result.commits} {result.commits === 1 ? 'commit' : 'commits'} to {result.branch}; its head is now{' '}
          <code>{result.head.slice(0, 12)}</code>.
          {result.pull_request_url?.startsWith('https://') && (
            <>
              {' '}
              <a href={result.pull_request_url} target="_blank" rel="noopener noreferrer">
                Open a pull request
              </a>
            </>
          )}
        </p>
      )}
      <div>
        <button type="submit" disabled={busy || (branch.trim() === '' && suggested === '')}>
          Push
        </button>
      </div>
    </form>
  )
}

function firstLine(s: string): string {
  const i = s.indexOf('\n')
  return i < 0 ? s : s.slice(0, i)
}

function Commits({ commits, error }: { commits?: Commit[]; error?: unknown }) {
  return (
    <section aria-labelledby="commits-heading">
      <h3 id="commits-heading">Commits</h3>
      <p className="muted">One for each applied change set, authored by the person who asked for it.</p>
      <ErrorText error={error} />
      {!commits && !error && <Loading what="commits" />}
      {commits && commits.length === 0 && <p className="empty">No commits yet: an applied change set makes one.</p>}
      {commits && commits.length > 0 && (
        <table className="list" aria-label="Commits">
          <thead>
            <tr>
              <th scope="col">Commit</th>
              <th scope="col">Message</th>
              <th scope="col">Author</th>
              <th scope="col">Committed</th>
              <th scope="col">Change set</th>
            </tr>
          </thead>
          <tbody>
            {commits.map((c) => (
              <tr key={c.sha}>
                <th scope="row">
                  <code title={c.sha}>{c.sha.slice(0, 12)}</code>
                </th>
                <td>{firstLine(c.message)}</td>
                <td>
                  {c.author.name} <span className="muted">&lt;{c.author.email}&gt;</span>
                </td>
                <td>{formatTime(c.committed_at)}</td>
                <td>
                  {c.change_set_id ? (
                    <Link to={`/changes/${encodeURIComponent(c.change_set_id)}`}>change set {shortId(c.change_set_id)}</Link>
                  ) : (
                    '—'
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  )
}

export function RepositoryPanel({ agent, pollOptions = clonePoll }: { agent: Agent; pollOptions?: PollOptions }) {
  const repo = useLoad(() => api.repository(agent.id), [agent.id])
  const status = repo.data?.status
  const commits = useLoad(() => (status === 'ready' ? api.commits(agent.id) : Promise.resolve(undefined)), [agent.id, status])
  const [pollProblem, setPollProblem] = useState<unknown>()
  const setRepo = repo.setData

  useEffect(() => {
    if (status !== 'cloning') return
    return poll((signal) => api.repository(agent.id, signal), {
      onValue: (r) => {
        setPollProblem(undefined)
        setRepo(r)
        return r.status === 'cloning'
      },
      onError: setPollProblem,
      onGiveUp: () => setPollProblem(new Error('the clone is taking long; reload the page to see where it stands')),
    }, pollOptions)
  }, [agent.id, status, setRepo, pollOptions])

  return (
    <section aria-labelledby="repository-heading">
      <h2 id="repository-heading">Repository</h2>
      {isNotFound(repo.error) && !repo.data ? (
        <>
          <p className="empty">This agent's workspace is not a git repository.</p>
          {agent.can.includes('write_files') && <CloneForm agentId={agent.id} onStarted={setRepo} />}
        </>
      ) : (
        <ErrorText error={repo.error} />
      )}
      {repo.loading && !repo.data && <Loading what="the repository" />}
      {repo.data && (
        <>
          <dl className="facts">
            <div className="fact">
              <dt>URL</dt>
              <dd>{repo.data.url}</dd>
            </div>
            <div className="fact">
              <dt>Ref</dt>
              <dd>{repo.data.ref || 'the default branch'}</dd>
            </div>
            <div className="fact">
              <dt>Head</dt>
              <dd>{repo.data.head ? <code title={repo.data.head}>{repo.data.head.slice(0, 12)}</code> : '—'}</dd>
            </div>
            {repo.data.last_push && (
              <div className="fact">
                <dt>Last push</dt>
                <dd>
                  {repo.data.last_push.branch} at <code title={repo.data.last_push.head}>{repo.data.last_push.head.slice(0, 12)}</code>,{' '}
                  {formatTime(repo.data.last_push.at)}
                  {repo.data.last_push.by ? ` by ${repo.data.last_push.by.name}` : ''}
                </dd>
              </div>
            )}
          </dl>
          <CloneStatus repo={repo.data} />
          <ErrorText error={pollProblem} />
          {status === 'ready' && <Commits commits={commits.data} error={commits.error} />}
          {status === 'ready' && agent.can.includes('write_files') && repo.data.ref && (
            <SyncForm
              agentId={agent.id}
              branch={repo.data.ref}
              onSynced={() => {
                void repo.reload()
                void commits.reload()
              }}
            />
          )}
          {status === 'ready' && agent.can.includes('write_files') && (
            <PushForm
              agentId={agent.id}
              suggested={repo.data.suggested_branch ?? ''}
              onPushed={() => {
                void repo.reload()
                void commits.reload()
              }}
            />
          )}
        </>
      )}
    </section>
  )
}
