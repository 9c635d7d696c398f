// The repository tab: the clone's progress polled to the end, a failed
// clone in the server's words, the commits linked to their change sets,
// and push offered only to editors and owners, to the suggested branch
// when none is named, with a link to open a pull request when the server
// gives one, its refusal (the remote moved) in the server's words.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, within } from '@testing-library/react'
import { RepositoryPanel } from './Repository'
import { agentAt, serveRoutes, type Answer } from './testkit'
import type { Level, Repository } from './types'

const fast = { intervalMs: 5, timeoutMs: 1000, deadlineMs: 10_000 }
const ready: Repository = {
  url: 'https://git.example.com/team/app.git',
  ref: 'main',
  head: 'a1b2c3d4e5f60718293a',
  status: 'ready',
  progress: 100,
  suggested_branch: 'corral/helper-abc123',
}
const commits = {
  items: [
    {
      sha: 'f00dfeedbeef0123456789abcdef012345678901',
      author: { name: 'Alice Asker', email: 'alice@example.com' },
      committed_at: '2025-01-02T00:00:00Z',
      message: 'Write hello.txt\n\nCorral-Run: run_1\nCorral-Change-Set: chg_abcdef12\nApproved-By: Olive',
      change_set_id: 'chg_abcdef12',
    },
    { sha: '0123456789abcdef0123456789abcdef01234567', author: { name: 'Bob', email: 'bob@example.com' }, committed_at: '2025-01-01T00:00:00Z', message: 'Initial import' },
  ],
}

function serve(route: (method: string, url: string, body: unknown) => Answer | undefined) {
  return serveRoutes((method, url, body) => {
    const a = route(method, url, body)
    if (a) return a
    if (url === '/api/agents/agt_1/repository/commits') return [200, commits]
    if (url === '/api/credentials') return [200, { items: [] }]
    return undefined
  })
}

afterEach(() => vi.unstubAllGlobals())

describe('RepositoryPanel', () => {
  it('follows a clone’s progress until it is ready, then lists the commits', async () => {
    const states: Repository[] = [
      { ...ready, head: '', status: 'cloning', progress: 10 },
      { ...ready, head: '', status: 'cloning', progress: 60 },
      ready,
    ]
    let polls = 0
    const calls = serve((method, url) => {
      if (method === 'GET' && url === '/api/agents/agt_1/repository') return [200, states[Math.min(polls++, states.length - 1)]]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('viewer')} pollOptions={fast} />)
    const bar = (await screen.findByRole('progressbar', { name: 'Clone progress' })) as HTMLProgressElement
    expect([10, 60]).toContain(bar.value)
    const table = await screen.findByRole('table', { name: 'Commits' })
    expect(screen.queryByRole('progressbar')).toBeNull()
    const link = within(table).getByRole('link', { name: 'change set abcdef12' })
    expect(link.getAttribute('href')).toBe('/changes/chg_abcdef12')
    expect(within(table).getByText('Write hello.txt')).toBeTruthy()
    expect(within(table).getByText('Alice Asker')).toBeTruthy()
    const repoPolls = calls.filter((c) => c.url === '/api/agents/agt_1/repository').length
    expect(repoPolls).toBe(3)
    // Ready: no more polling.
    await new Promise((r) => setTimeout(r, 50))
    expect(calls.filter((c) => c.url === '/api/agents/agt_1/repository').length).toBe(repoPolls)
  })

  it('shows a failed clone in the server’s words', async () => {
    serve((_, url) =>
      url === '/api/agents/agt_1/repository'
        ? [200, { ...ready, head: '', status: 'failed', error: 'Authentication failed for git.example.com: check the credential.' }]
        : undefined,
    )
    render(<RepositoryPanel agent={agentAt('editor')} pollOptions={fast} />)
    expect((await screen.findByRole('alert')).textContent).toBe('Authentication failed for git.example.com: check the credential.')
    expect(screen.queryByRole('button', { name: 'Push' })).toBeNull()
  })

  const levels: { level: Level; push: boolean }[] = [
    { level: 'viewer', push: false },
    { level: 'runner', push: false },
    { level: 'editor', push: true },
    { level: 'owner', push: true },
  ]
  for (const c of levels) {
    it(`offers a ${c.level} ${c.push ? 'the push' : 'no push'}`, async () => {
      serve((_, url) => (url === '/api/agents/agt_1/repository' ? [200, ready] : undefined))
      render(<RepositoryPanel agent={agentAt(c.level)} pollOptions={fast} />)
      await screen.findByRole('table', { name: 'Commits' })
      expect(screen.queryByRole('button', { name: 'Push' }) !== null).toBe(c.push)
      expect(screen.queryByLabelText('Branch') !== null).toBe(c.push)
      expect(screen.queryByRole('button', { name: 'Sync with upstream' }) !== null).toBe(c.push)
    })
  }

  it('pushes a branch and says what went', async () => {
    const calls = serve((method, url) => {
      if (url === '/api/agents/agt_1/repository') return [200, ready]
      if (method === 'POST' && url === '/api/agents/agt_1/repository/push') return [200, { branch: 'corral/work', head: 'f00dfeedbeef0123', commits: 2 }]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('editor')} pollOptions={fast} />)
    fireEvent.change(await screen.findByLabelText('Branch'), { target: { value: 'corral/work' } })
    fireEvent.click(screen.getByRole('button', { name: 'Push' }))
    expect((await screen.findByText(/^Pushed 2 commits/)).textContent).toBe('Pushed 2 commits to corral/work; its head is now f00dfeedbeef.')
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ branch: 'corral/work' })
  })

  it('pushes to the suggested branch when none is named, and links to the pull request', async () => {
    const pr = 'https://github.com/team/app/compare/main...corral/helper-abc123?expand=1'
    const calls = serve((method, url) => {
      if (url === '/api/agents/agt_1/repository') return [200, ready]
      if (method === 'POST' && url === '/api/agents/agt_1/repository/push')
        return [200, { branch: 'corral/helper-abc123', head: 'f00dfeedbeef0123', commits: 1, pull_request_url: pr }]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('editor')} pollOptions={fast} />)
    const input = (await screen.findByLabelText('Branch')) as HTMLInputElement
    expect(input.placeholder).toBe('corral/helper-abc123')
    expect(input.required).toBe(false)
    fireEvent.click(screen.getByRole('button', { name: 'Push' }))
    const link = await screen.findByRole('link', { name: 'Open a pull request' })
    expect(link.getAttribute('href')).toBe(pr)
    expect(link.getAttribute('rel')).toBe('noopener noreferrer')
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({})
  })

  it('offers no pull request link when the server gives none', async () => {
    serve((method, url) => {
      if (url === '/api/agents/agt_1/repository') return [200, ready]
      if (method === 'POST') return [200, { branch: 'corral/work', head: 'f00dfeedbeef0123', commits: 2 }]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('editor')} pollOptions={fast} />)
    fireEvent.change(await screen.findByLabelText('Branch'), { target: { value: 'corral/work' } })
    fireEvent.click(screen.getByRole('button', { name: 'Push' }))
    await screen.findByText(/^Pushed 2 commits/)
    expect(screen.queryByRole('link', { name: 'Open a pull request' })).toBeNull()
  })

  it('shows a push the remote refused (it moved) in the server’s words', async () => {
    const words = 'The remote branch corral/work moved to 9e8d7c6b5a; pull it into the workspace first.'
    serve((method, url) => {
      if (url === '/api/agents/agt_1/repository') return [200, ready]
      if (method === 'POST') return [409, { error: { code: 'conflict', message: words } }]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('owner')} pollOptions={fast} />)
    fireEvent.change(await screen.findByLabelText('Branch'), { target: { value: 'corral/work' } })
    fireEvent.click(screen.getByRole('button', { name: 'Push' }))
    expect((await screen.findByRole('alert')).textContent).toBe(words)
  })

  it('syncs with upstream and says what it did', async () => {
    const calls = serve((method, url) => {
      if (url === '/api/agents/agt_1/repository') return [200, ready]
      if (method === 'POST' && url === '/api/agents/agt_1/repository/sync')
        return [200, { head: 'f00dfeedbeef0123', upstream: 'abcdef0123456789', fast_forward: false, rebased: 2, status: 'rebased', pending: [] }]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('editor')} pollOptions={fast} />)
    fireEvent.click(await screen.findByRole('button', { name: 'Sync with upstream' }))
    expect((await screen.findByText(/^Rebased/)).textContent).toBe("Rebased 2 commits onto upstream's abcdef012345; the head is now f00dfeedbeef.")
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.url)).toEqual(['/api/agents/agt_1/repository/sync'])
  })

  it('says a change set still waits after a sync, to be checked against the new base', async () => {
    serve((method, url) => {
      if (url === '/api/agents/agt_1/repository') return [200, ready]
      if (method === 'POST' && url === '/api/agents/agt_1/repository/sync')
        return [200, { head: 'abcdef0123456789', upstream: 'abcdef0123456789', fast_forward: true, rebased: 0, status: 'fast_forward', pending: ['chg_1'] }]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('editor')} pollOptions={fast} />)
    fireEvent.click(await screen.findByRole('button', { name: 'Sync with upstream' }))
    expect((await screen.findByText(/^Fast-forwarded/)).textContent).toBe(
      "Fast-forwarded to upstream's abcdef012345. A change set waits for review: a file the sync changed is conflicted when it is decided.",
    )
  })

  it('shows a refused sync’s conflicting paths in the server’s words', async () => {
    const words = 'the workspace\'s commits do not apply cleanly onto upstream: conflict in "README.md"; nothing was changed'
    serve((method, url) => {
      if (url === '/api/agents/agt_1/repository') return [200, ready]
      if (method === 'POST') return [409, { error: { code: 'conflict', reason: 'sync_conflict', message: words } }]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('owner')} pollOptions={fast} />)
    fireEvent.click(await screen.findByRole('button', { name: 'Sync with upstream' }))
    expect((await screen.findByRole('alert')).textContent).toBe(words)
  })

  it('offers an editor a clone when there is no repository, with the credentials to pick', async () => {
    const calls = serve((method, url) => {
      if (method === 'GET' && url === '/api/agents/agt_1/repository') return [404, { error: { code: 'not_found', message: 'Not found.' } }]
      if (url === '/api/credentials')
        return [
          200,
          {
            items: [
              { id: 'crd_1', name: 'work', host: 'git.example.com', username: 'alice', repositories: ['git.example.com/team/*'], created_at: '2025-01-01T00:00:00Z' },
            ],
          },
        ]
      if (method === 'PUT') return [202, { ...ready, head: '', status: 'cloning', progress: 0 }]
      return undefined
    })
    render(<RepositoryPanel agent={agentAt('editor')} pollOptions={{ ...fast, intervalMs: 60_000 }} />)
    fireEvent.change(await screen.findByLabelText('Repository URL'), { target: { value: ' https://git.example.com/team/app.git ' } })
    fireEvent.change(screen.getByLabelText('Ref (optional)'), { target: { value: 'main' } })
    await screen.findByRole('option', { name: 'work (alice@git.example.com: git.example.com/team/*)' })
    fireEvent.change(screen.getByLabelText('Credential'), { target: { value: 'crd_1' } })
    fireEvent.click(screen.getByRole('button', { name: 'Clone' }))
    await screen.findByRole('progressbar', { name: 'Clone progress' })
    expect(calls.find((c) => c.method === 'PUT')?.body).toEqual({ url: 'https://git.example.com/team/app.git', ref: 'main', credential_id: 'crd_1' })
  })

  it('offers a viewer no clone when there is no repository', async () => {
    serve((_, url) => (url === '/api/agents/agt_1/repository' ? [404, { error: { code: 'not_found', message: 'Not found.' } }] : undefined))
    render(<RepositoryPanel agent={agentAt('viewer')} pollOptions={fast} />)
    await screen.findByText("This agent's workspace is not a git repository.")
    expect(screen.queryByRole('button', { name: 'Clone' })).toBeNull()
    expect(screen.queryByLabelText('Repository URL')).toBeNull()
  })
})
