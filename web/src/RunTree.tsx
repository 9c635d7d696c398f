// A run's delegation tree: the runs it started through its `delegate` tool,
// the runs those started, and so on, as a nested list with each run's
// agent, status, tokens and depth. The API leaves out every run the viewer
// may not see together with what it started, so what is shown is the part
// of the tree this person may look at. Followed while anything in it goes.

import { useEffect, useMemo, useState } from 'react'
import { useAgentNames } from './agentNames'
import { api } from './api'
import { StatusBadge } from './badges'
import { errorMessage, isNotFound } from './errors'
import { shortId } from './format'
import { isTerminal } from './live'
import { poll } from './poll'
import { Link } from './router'
import type { Run } from './types'

/** How often the tree is asked for again while a run in it is going. */
export const treeIntervalMs = 3000
/** The longest one request for the tree may take. */
const treeTimeoutMs = 10_000

export interface TreeNode {
  run: Run
  children: TreeNode[]
}

/**
 * The runs below rootId, nested by parent_run_id, each level in the order
 * given (the API's: oldest first). A run whose parent is not in the list is
 * left out, as the API leaves out what a hidden run started; a run is
 * placed once however its links read, so a bad answer cannot loop.
 */
export function buildTree(rootId: string, runs: Run[]): TreeNode[] {
  const byParent = new Map<string, Run[]>()
  for (const r of runs) {
    if (!r.parent_run_id || r.id === rootId) continue
    const siblings = byParent.get(r.parent_run_id)
    if (siblings) siblings.push(r)
    else byParent.set(r.parent_run_id, [r])
  }
  const placed = new Set<string>([rootId])
  const below = (id: string): TreeNode[] => {
    const runs = (byParent.get(id) ?? []).filter((r) => !placed.has(r.id))
    for (const r of runs) placed.add(r.id)
    return runs.map((r) => ({ run: r, children: below(r.id) }))
  }
  return below(rootId)
}

function count(nodes: TreeNode[]): { all: number; going: number } {
  let all = 0
  let going = 0
  for (const n of nodes) {
    const c = count(n.children)
    all += 1 + c.all
    going += (isTerminal(n.run.status) ? 0 : 1) + c.going
  }
  return { all, going }
}

function anyGoing(runs: Run[]): boolean {
  return runs.some((r) => !isTerminal(r.status))
}

/**
 * Loads the tree of runId, again whenever refresh changes (the page bumps it
 * on a `delegated` event) and every treeIntervalMs while a run in it is
 * going. The poll has no deadline: it ends when every run is final or the
 * page goes, as the run's own event stream does.
 */
function useTree(runId: string, refresh: number): { runs?: Run[]; error?: unknown } {
  const [runs, setRuns] = useState<Run[]>()
  const [error, setError] = useState<unknown>()
  useEffect(() => {
    let stopped = false
    let stopPoll: (() => void) | undefined
    const take = (items: Run[]): boolean => {
      setRuns(items)
      setError(undefined)
      return anyGoing(items)
    }
    const fail = (err: unknown) => {
      setError(err)
      // Not found: the run is gone or no longer ours to see; asking again will not change that.
      if (isNotFound(err)) stopPoll?.()
    }
    const follow = () => {
      stopPoll = poll((signal) => api.tree(runId, signal), { onValue: take, onError: fail }, {
        intervalMs: treeIntervalMs,
        timeoutMs: treeTimeoutMs,
        deadlineMs: Number.POSITIVE_INFINITY,
      })
    }
    const ctl = new AbortController()
    const cut = setTimeout(() => ctl.abort(), treeTimeoutMs)
    api
      .tree(runId, ctl.signal)
      .then((items) => {
        if (!stopped && take(items)) follow()
      })
      .catch((err) => {
        if (stopped) return
        fail(err)
        if (!isNotFound(err)) follow()
      })
      .finally(() => clearTimeout(cut))
    return () => {
      stopped = true
      ctl.abort()
      stopPoll?.()
    }
  }, [runId, refresh])
  return { runs, error }
}

/** The Delegation panel of a run's page: nothing when the run started no run this viewer may see. */
export function RunTree({ run, refresh = 0 }: { run: Run; refresh?: number }) {
  const { runs, error } = useTree(run.id, refresh)
  const nodes = useMemo(() => (runs ? buildTree(run.id, runs) : []), [run.id, runs])
  const names = useAgentNames(nodes.length > 0 && runs ? runs.map((r) => r.agent_id) : [])

  if (nodes.length === 0) {
    // Whether there is a tree at all is unknown until it loads: say so quietly.
    if (error !== undefined && !isNotFound(error)) {
      return <p className="muted">The delegation tree could not be loaded: {errorMessage(error)}</p>
    }
    return null
  }
  const { all, going } = count(nodes)
  return (
    <section className="run-tree" aria-labelledby="run-tree-title">
      <h2 id="run-tree-title">Delegation</h2>
      <p className="muted">
        {all === 1 ? '1 run' : `${all} runs`} started from this one through delegation
        {going > 0 ? `, ${going} still going` : ''}.
      </p>
      {error !== undefined && (
        <p role="alert" className="error">
          {errorMessage(error)}
        </p>
      )}
      <TreeList nodes={nodes} names={names} label="Runs delegated from this run" />
    </section>
  )
}

function TreeList({ nodes, names, label }: { nodes: TreeNode[]; names: ReadonlyMap<string, string>; label: string }) {
  return (
    <ul className="tree" aria-label={label}>
      {nodes.map((n) => (
        <TreeItem key={n.run.id} node={n} names={names} />
      ))}
    </ul>
  )
}

function TreeItem({ node, names }: { node: TreeNode; names: ReadonlyMap<string, string> }) {
  const r = node.run
  const enc = encodeURIComponent
  return (
    <li className="tree-item" data-run={r.id}>
      <div className="tree-run">
        <Link to={`/runs/${enc(r.id)}`}>run {shortId(r.id)}</Link>
        <span>
          agent <Link to={`/agents/${enc(r.agent_id)}`}>{names.get(r.agent_id) ?? shortId(r.agent_id)}</Link>
        </span>
        <StatusBadge status={r.status} />
        <span className="muted">
          {r.tokens.input} in, {r.tokens.output} out tokens · depth {r.depth}
        </span>
      </div>
      {node.children.length > 0 && <TreeList nodes={node.children} names={names} label={`Runs delegated from run ${shortId(r.id)}`} />}
    </li>
  )
}
