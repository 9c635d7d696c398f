// The change-set page: ticking entries and deciding just those, who sees
// the controls, unusual names shown escaped, diffs of decided sets, and a
// conflict in the server's words. The API is a fake fetch; the page is real.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import { ChangePage } from './pages/Change'
import { agentAt } from './testkit'
import type { Agent, ChangeEntry, ChangeSet, Level } from './types'

function agent(access: Level): Agent {
  return agentAt(access)
}

function entry(path: string, more: Partial<ChangeEntry> = {}): ChangeEntry {
  return {
    path,
    path_escaped: path,
    op: 'create',
    old_sha256: '',
    new_sha256: `sha-${path}`,
    size: 6,
    mode: '-rw-r--r--',
    class: 'ordinary',
    flags: [],
    note: '',
    state: 'pending',
    diff: `--- a/${path}\n+++ b/${path}\n@@ -0,0 +1 @@\n+text of ${path}\n`,
    ...more,
  }
}

function changeSet(entries: ChangeEntry[], more: Partial<ChangeSet> = {}): ChangeSet {
  return {
    id: 'chg_1',
    run_id: 'run_1',
    agent_id: 'agt_1',
    status: 'pending',
    mode: 'review',
    entries,
    created_at: '2025-01-01T00:00:00Z',
    expires_at: '2025-01-08T00:00:00Z',
    decided_by: null,
    decided_at: null,
    disk_bytes: 0,
    ...more,
  }
}

interface Call {
  method: string
  path: string
  body: unknown
}

/**
 * A fake API: GET answers the set as it stands; a decision is answered by
 * decided(verb, body), which may change the set (what a later GET answers)
 * and returns the status and body to send.
 */
function serve(level: Level, initial: ChangeSet, decided?: (verb: string, body: unknown, cs: ChangeSet) => { status: number; body: unknown; next?: ChangeSet }) {
  let current = initial
  const calls: Call[] = []
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? 'GET'
      const body = init?.body === undefined ? undefined : JSON.parse(String(init.body))
      calls.push({ method, path: url, body })
      const json = (status: number, b: unknown) => new Response(JSON.stringify(b), { status })
      if (method === 'GET' && url === '/api/agents/agt_1') return json(200, agent(level))
      if (method === 'GET' && url === '/api/changes/chg_1') return json(200, current)
      const m = /^\/api\/changes\/chg_1\/(approve|reject)$/.exec(url)
      if (method === 'POST' && m && decided) {
        const answer = decided(m[1], body, current)
        if (answer.next) current = answer.next
        return json(answer.status, answer.body)
      }
      return json(404, { error: { code: 'not_found', message: 'Not found.' } })
    }),
  )
  return calls
}

/** Decides the named entries (or every pending one) the way the contract says, answering without diffs. */
function honest(verb: string, body: unknown, cs: ChangeSet) {
  const paths = (body as { paths?: string[] } | undefined)?.paths
  const state = verb === 'approve' ? 'applied' : 'rejected'
  const entries = cs.entries.map((e) =>
    e.state === 'pending' && (paths === undefined || paths.includes(e.path)) ? { ...e, state: state as ChangeEntry['state'] } : e,
  )
  const status: ChangeSet['status'] = entries.some((e) => e.state === 'pending') ? 'pending' : (state as ChangeSet['status'])
  const next = changeSet(entries, { status })
  const answer = { ...next, entries: next.entries.map(({ diff: _diff, ...e }) => e) }
  return { status: 200, body: answer, next }
}

const decisions = (calls: Call[]) => calls.filter((c) => c.method === 'POST')

function region(name: string) {
  return screen.getByRole('region', { name })
}

function stateOf(name: string): string {
  return within(region(name)).getByTitle(/^State: /).textContent ?? ''
}

async function page() {
  render(<ChangePage id="chg_1" />)
  await screen.findByRole('heading', { name: /^Change set / })
  // The agent (and so the caller's level) arrives after the set.
  await screen.findByRole('link', { name: 'helper' })
}

afterEach(() => vi.unstubAllGlobals())

describe('ChangePage partial decisions', () => {
  const cases = [
    { name: 'approve', button: 'Approve selected', state: 'applied' },
    { name: 'reject', button: 'Reject selected', state: 'rejected' },
  ]
  for (const c of cases) {
    it(`${c.name}s exactly the ticked paths and shows each entry's state`, async () => {
      const calls = serve('editor', changeSet([entry('a.txt'), entry('b.txt'), entry('c.txt')]), honest)
      await page()
      fireEvent.click(screen.getByRole('checkbox', { name: 'c.txt' }))
      fireEvent.click(screen.getByRole('checkbox', { name: 'a.txt' }))
      fireEvent.click(screen.getByRole('button', { name: `${c.button} (2)` }))
      await waitFor(() => expect(stateOf('a.txt')).toBe(c.state))
      expect(decisions(calls)).toEqual([{ method: 'POST', path: `/api/changes/chg_1/${c.name}`, body: { paths: ['a.txt', 'c.txt'] } }])
      expect(stateOf('b.txt')).toBe('pending')
      expect(stateOf('c.txt')).toBe(c.state)
      expect(screen.getByTitle('Status: pending')).toBeTruthy()
      // Decided entries lose their box; the open one keeps it, unticked.
      expect(screen.queryAllByRole('checkbox').map((b) => b.getAttribute('aria-label'))).toEqual(['b.txt'])
      expect((screen.getByRole('checkbox', { name: 'b.txt' }) as HTMLInputElement).checked).toBe(false)
      // The answer carried no diffs; the page keeps the ones it had.
      expect(within(region('a.txt')).getByText('+text of a.txt')).toBeTruthy()
    })
  }

  it('decides the last entry and shows the status the server answers', async () => {
    serve('owner', changeSet([entry('a.txt', { state: 'applied' }), entry('b.txt')]), honest)
    await page()
    fireEvent.click(screen.getByRole('checkbox', { name: 'b.txt' }))
    fireEvent.click(screen.getByRole('button', { name: 'Reject selected (1)' }))
    await waitFor(() => expect(screen.getByTitle('Status: rejected')).toBeTruthy())
    expect(stateOf('a.txt')).toBe('applied')
    expect(stateOf('b.txt')).toBe('rejected')
    expect(screen.queryAllByRole('checkbox')).toHaveLength(0)
    expect(screen.queryAllByRole('button', { name: /^(Approve|Reject)/ })).toHaveLength(0)
  })

  it('disables the selected buttons while nothing is ticked', async () => {
    serve('editor', changeSet([entry('a.txt'), entry('b.txt'), entry('p.env', { class: 'protected', state: 'denied' })]), honest)
    await page()
    const disabled = () =>
      ['Approve selected', 'Reject selected'].map((n) => (screen.getByRole('button', { name: new RegExp(`^${n} `) }) as HTMLButtonElement).disabled)
    expect(screen.getByRole('button', { name: 'Approve selected (0)' })).toBeTruthy()
    expect(disabled()).toEqual([true, true])
    fireEvent.click(screen.getByRole('button', { name: 'Select all' }))
    expect(screen.getByRole('button', { name: 'Approve selected (2)' })).toBeTruthy()
    expect(disabled()).toEqual([false, false])
    fireEvent.click(screen.getByRole('button', { name: 'Select none' }))
    expect(screen.getByRole('button', { name: 'Reject selected (0)' })).toBeTruthy()
    expect(disabled()).toEqual([true, true])
    fireEvent.click(screen.getByRole('checkbox', { name: 'b.txt' }))
    expect(disabled()).toEqual([false, false])
    fireEvent.click(screen.getByRole('checkbox', { name: 'b.txt' }))
    expect(disabled()).toEqual([true, true])
  })

  it('approves every pending entry with no body from Approve', async () => {
    const calls = serve('editor', changeSet([entry('a.txt'), entry('b.txt')]), honest)
    await page()
    fireEvent.click(screen.getByRole('checkbox', { name: 'a.txt' })) // a tick does not narrow Approve
    fireEvent.click(screen.getByRole('button', { name: 'Approve' }))
    await waitFor(() => expect(screen.getByTitle('Status: applied')).toBeTruthy())
    expect(decisions(calls)).toEqual([{ method: 'POST', path: '/api/changes/chg_1/approve', body: undefined }])
  })

  it('shows a conflict in the server’s words and the entry conflicted', async () => {
    const message = 'a.txt changed in the workspace since the run (it was modified); nothing was applied.'
    serve('editor', changeSet([entry('a.txt', { op: 'modify' }), entry('b.txt')]), (_verb, _body, cs) => ({
      status: 409,
      body: { error: { code: 'conflict', message } },
      next: { ...cs, entries: cs.entries.map((e) => (e.path === 'a.txt' ? { ...e, state: 'conflicted' as const } : e)) },
    }))
    await page()
    fireEvent.click(screen.getByRole('checkbox', { name: 'a.txt' }))
    fireEvent.click(screen.getByRole('button', { name: 'Approve selected (1)' }))
    expect((await screen.findByRole('alert')).textContent).toBe(message)
    await waitFor(() => expect(stateOf('a.txt')).toBe('conflicted'))
    expect(screen.queryAllByRole('checkbox', { name: 'a.txt' })).toHaveLength(0)
    expect(screen.getByRole('button', { name: 'Approve selected (0)' })).toBeTruthy()
    expect(stateOf('b.txt')).toBe('pending')
  })
})

describe('ChangePage who may tick what', () => {
  const levels: { level: Level; decides: boolean }[] = [
    { level: 'viewer', decides: false },
    { level: 'runner', decides: false },
    { level: 'editor', decides: true },
    { level: 'owner', decides: true },
  ]
  for (const c of levels) {
    it(`shows ${c.level}s ${c.decides ? 'boxes and buttons' : 'no boxes and no buttons'}`, async () => {
      serve(c.level, changeSet([entry('a.txt'), entry('b.txt')]))
      await page()
      expect(screen.queryAllByRole('checkbox')).toHaveLength(c.decides ? 2 : 0)
      for (const name of ['Select all', 'Select none', 'Approve selected (0)', 'Reject selected (0)', 'Approve', 'Reject']) {
        expect(screen.queryAllByRole('button', { name })).toHaveLength(c.decides ? 1 : 0)
      }
      expect(screen.queryAllByText('An editor or the owner decides this change set.')).toHaveLength(c.decides ? 0 : 1)
    })
  }

  it('gives protected entries no box', async () => {
    serve(
      'owner',
      changeSet([
        entry('ok.txt'),
        entry('.env', { class: 'protected', state: 'denied', flags: ['internal'], diff: undefined }),
        entry('link', { class: 'protected', state: 'pending', flags: ['symlink'], note: 'A symbolic link is never applied.', diff: undefined }),
      ]),
    )
    await page()
    expect(screen.queryAllByRole('checkbox').map((b) => b.getAttribute('aria-label'))).toEqual(['ok.txt'])
    expect(within(region('link')).getByText('Protected because: symlink')).toBeTruthy()
    expect(within(region('link')).getByText('A symbolic link is never applied.')).toBeTruthy()
    fireEvent.click(screen.getByRole('button', { name: 'Select all' }))
    expect(screen.getByRole('button', { name: 'Approve selected (1)' })).toBeTruthy()
  })
})

describe('ChangePage names and diffs', () => {
  const names = [
    { name: 'a right-to-left override', path: 'invoice\u202etxt.exe', escaped: 'invoice\\u202etxt.exe' },
    { name: 'a newline', path: 'notes\n.txt', escaped: 'notes\\n.txt' },
    { name: 'a terminal escape', path: 'x\x1b[2Jy.txt', escaped: 'x\\x1b[2Jy.txt' },
    { name: 'invalid UTF-8', path: 'bad\ufffd.txt', escaped: 'bad\\xff.txt' },
  ]
  for (const c of names) {
    it(`shows a name with ${c.name} escaped, badged and never raw`, async () => {
      const calls = serve(
        'editor',
        changeSet([
          entry(c.path, {
            path_escaped: c.escaped,
            class: 'risky',
            flags: ['name'],
            note: 'The name holds a control character.',
            // The diff's own headers carry the raw name; they are not shown.
            diff: `--- a/${c.path}\n+++ b/${c.path}\n@@ -0,0 +1 @@\n+plain content\n`,
          }),
        ]),
        honest,
      )
      await page()
      const r = region(c.escaped)
      expect(within(r).getByText(c.escaped, { selector: 'code' })).toBeTruthy()
      expect(within(r).getByText('unusual name')).toBeTruthy()
      expect(within(r).getByText('The name holds a control character.')).toBeTruthy()
      expect(within(r).getByText('+plain content')).toBeTruthy()
      expect(document.body.textContent).not.toContain(c.path)
      // The box is labelled as shown, and the server gets the path back as it sent it.
      fireEvent.click(screen.getByRole('checkbox', { name: c.escaped }))
      fireEvent.click(screen.getByRole('button', { name: 'Reject selected (1)' }))
      await waitFor(() => expect(decisions(calls)).toHaveLength(1))
      expect(decisions(calls)[0].body).toEqual({ paths: [c.path] })
    })
  }

  it('badges a name that breaks a rule, sent already escaped, and offers no box', async () => {
    // The server answers such an entry's path escaped too, so the two are equal.
    const name = 'evil\\u202etxt.exe'
    serve('owner', changeSet([entry(name, { class: 'protected', state: 'denied', flags: ['name'], note: 'The name holds a bidi control.' })]))
    await page()
    const r = region(name)
    expect(within(r).getByText(name, { selector: 'code' })).toBeTruthy()
    expect(within(r).getByText('unusual name')).toBeTruthy()
    expect(within(r).getByText('Protected because: name')).toBeTruthy()
    expect(screen.queryAllByRole('checkbox')).toHaveLength(0)
  })

  it('shows a plain name as it is, without the badge', async () => {
    serve('editor', changeSet([entry('src/main.go')]))
    await page()
    expect(within(region('src/main.go')).getByText('src/main.go', { selector: 'code' })).toBeTruthy()
    expect(screen.queryAllByText('unusual name')).toHaveLength(0)
  })

  const decided: { name: string; status: ChangeSet['status']; state: ChangeEntry['state'] }[] = [
    { name: 'applied', status: 'applied', state: 'applied' },
    { name: 'rejected', status: 'rejected', state: 'rejected' },
    { name: 'expired', status: 'expired', state: 'dropped' },
  ]
  for (const c of decided) {
    it(`still shows the diff of a set that is ${c.name}`, async () => {
      serve('editor', changeSet([entry('hello.txt', { state: c.state })], { status: c.status }))
      await page()
      const diff = screen.getByRole('group', { name: 'Diff of hello.txt' })
      expect(within(diff).getByText('+text of hello.txt')).toBeTruthy()
      expect(stateOf('hello.txt')).toBe(c.state)
      expect(screen.queryAllByRole('checkbox')).toHaveLength(0)
    })
  }
})
