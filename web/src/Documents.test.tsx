// The documents tab lists an agent's documents to every level, offers upload
// and delete only to editors and owners, uploads several files one after
// another with a progress bar each and a refusal in the server's words next
// to its file, and its search shows passages or says nothing relevant was
// found; answers that drew on documents show their sources.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import { DocumentsTab, MessageSources } from './Documents'
import { AgentPage } from './pages/Agent'
import { SessionContext } from './session'
import { agentAt, FakeXHR, serveRoutes, stubXHR, type Answer } from './testkit'
import type { Doc, Level, User } from './types'

function doc(id: string, name: string, over: Partial<Doc> = {}): Doc {
  return {
    id,
    name,
    source: 'private',
    bytes: 2048,
    chunks: 4,
    embedded: false,
    author: { id: 'usr_a', name: 'Alice' },
    created_at: '2025-01-01T00:00:00Z',
    can_delete: true,
    ...over,
  }
}

const guide = doc('doc_1', 'guide.md')
const handbook = doc('doc_2', 'handbook.md', { source: 'library', bytes: 512, chunks: 1, author: { id: 'usr_b', name: 'Bea' }, can_delete: false })

function serve(list: () => Doc[], extra: (method: string, url: string, body: unknown) => Answer | undefined = () => undefined) {
  return serveRoutes((method, url, body) => {
    const x = extra(method, url, body)
    if (x) return x
    if (method === 'GET' && url === '/api/agents/agt_1/documents') return [200, { items: list() }]
    return undefined
  })
}

function choose(...files: File[]) {
  fireEvent.change(screen.getByLabelText('Document files'), { target: { files } })
}

beforeEach(() => stubXHR())
afterEach(() => vi.unstubAllGlobals())

describe('DocumentsTab per level', () => {
  const levels: { level: Level; edits: boolean }[] = [
    { level: 'viewer', edits: false },
    { level: 'runner', edits: false },
    { level: 'editor', edits: true },
    { level: 'owner', edits: true },
  ]
  for (const c of levels) {
    it(`lists the documents to a ${c.level}${c.edits ? ', with upload and delete' : ', with nothing that changes them'}`, async () => {
      // can_delete is true for both private ones: the level alone must keep Delete from a viewer or runner.
      serve(() => [guide, doc('doc_3', 'notes.txt', { bytes: 10, chunks: 1, embedded: true }), handbook])
      render(<DocumentsTab agent={agentAt(c.level)} />)
      const table = await screen.findByRole('table', { name: 'Documents of helper' })
      const row = within(table).getByRole('row', { name: /guide\.md/ })
      const cells = within(row).getAllByRole('cell').map((td) => td.textContent)
      expect(cells.slice(0, 4)).toEqual(['private', '2.0 KiB', '4', 'Alice'])
      expect(within(within(table).getByRole('row', { name: /notes\.txt/ })).getAllByRole('cell')[2].textContent).toBe('1 · with embeddings')
      expect(within(table).getByRole('row', { name: /handbook\.md/ }).textContent).toContain('library')
      expect(screen.queryAllByRole('button', { name: /^Delete / }).map((b) => b.getAttribute('aria-label'))).toEqual(
        c.edits ? ['Delete guide.md', 'Delete notes.txt'] : [],
      )
      expect(screen.queryByLabelText('Document files') !== null).toBe(c.edits)
      expect(screen.getByRole('searchbox', { name: 'Search query' })).toBeTruthy()
      expect(screen.getByRole('link', { name: 'shared library' }).getAttribute('href')).toBe('/library')
    })
  }

  const library: { on: boolean; says: string; search: string }[] = [
    { on: false, says: 'It does not use the shared library (an editor turns that on in its settings).', search: 'its private documents.' },
    { on: true, says: 'Its runs also draw on the shared library, marked to the model as untrusted.', search: 'its private documents and the library’s.' },
  ]
  for (const c of library) {
    it(`says whether the agent uses the shared library (${c.on ? 'on' : 'off'})`, async () => {
      serve(() => [guide])
      const a = agentAt('viewer')
      render(<DocumentsTab agent={{ ...a, policy: { ...a.policy, library: c.on } }} />)
      await screen.findByRole('table', { name: 'Documents of helper' })
      expect(document.body.textContent).toContain(c.says)
      expect(document.body.textContent).toContain(`What a run of this agent would be given for a question: ${c.search}`)
    })
  }

  it('never offers to delete a library document from an agent, even to its owner', async () => {
    serve(() => [{ ...handbook, can_delete: true }])
    render(<DocumentsTab agent={agentAt('owner')} />)
    await screen.findByRole('row', { name: /handbook\.md/ })
    expect(screen.queryAllByRole('button', { name: /^Delete / })).toHaveLength(0)
  })

  it('says so when there are none', async () => {
    serve(() => [])
    render(<DocumentsTab agent={agentAt('editor')} />)
    expect((await screen.findByText(/^No documents yet/)).textContent).toBe('No documents yet: upload text, Markdown or source files below.')
  })
})

describe('uploading documents', () => {
  it('sends files one after another, each with its progress bar, and lists what was indexed', async () => {
    let stored: Doc[] = []
    const calls = serve(() => stored)
    render(<DocumentsTab agent={agentAt('editor')} />)
    await screen.findByText(/^No documents yet/)
    choose(new File(['# Guide\n'.repeat(250)], 'guide.md', { type: 'text/markdown' }), new File(['package main\n'], 'main.go'))

    await waitFor(() => expect(FakeXHR.all).toHaveLength(1))
    const first = FakeXHR.all[0]
    expect([first.method, first.url, first.headers['Content-Type']]).toEqual(['POST', '/api/agents/agt_1/documents?name=guide.md', 'text/markdown'])
    expect((first.body as File).name).toBe('guide.md')
    const second = () => screen.getByRole('listitem', { name: 'Upload of main.go' })
    expect(within(second()).getByText('waiting…')).toBeTruthy()

    const bar = () => screen.getByRole('progressbar', { name: 'Upload progress of guide.md' }) as HTMLProgressElement
    expect(bar().value).toBe(0)
    first.progress(500, 2000)
    await waitFor(() => expect(bar().value).toBe(25))
    expect(screen.getByText(/^25% · 500 B of 2\.0 KiB$/)).toBeTruthy()
    first.progress(2000, 2000)
    await screen.findByText('Uploaded; the server is indexing it…')
    // The second goes up only once the first is answered.
    expect(FakeXHR.all).toHaveLength(1)

    stored = [doc('doc_9', 'guide.md', { bytes: 2000, chunks: 3 })]
    first.answer(201, stored[0])
    const done = screen.getByRole('listitem', { name: 'Upload of guide.md' })
    await waitFor(() => expect(done.textContent).toContain('indexed: 3 passages'))
    expect(within(done).queryByRole('progressbar')).toBeNull()
    await screen.findByRole('row', { name: /guide\.md/ })
    expect(calls.filter((c) => c.url === '/api/agents/agt_1/documents')).toHaveLength(2)

    await waitFor(() => expect(FakeXHR.all).toHaveLength(2))
    const next = FakeXHR.all[1]
    // The browser knows no type for a .go file: it goes as plain text.
    expect([next.url, next.headers['Content-Type']]).toEqual(['/api/agents/agt_1/documents?name=main.go', 'text/plain'])
    next.progress(13, 13)
    next.answer(201, doc('doc_10', 'main.go', { chunks: 1 }))
    await waitFor(() => expect(second().textContent).toContain('indexed: 1 passage'))
  })

  it('holds a file chosen while another goes up until that one is answered', async () => {
    serve(() => [])
    render(<DocumentsTab agent={agentAt('editor')} />)
    await screen.findByText(/^No documents yet/)
    choose(new File(['one'], 'one.txt', { type: 'text/plain' }))
    await waitFor(() => expect(FakeXHR.all).toHaveLength(1))
    choose(new File(['two'], 'two.txt', { type: 'text/plain' }))
    const two = screen.getByRole('listitem', { name: 'Upload of two.txt' })
    expect(within(two).getByText('waiting…')).toBeTruthy()
    expect(FakeXHR.all).toHaveLength(1)
    FakeXHR.all[0].answer(201, doc('doc_1', 'one.txt', { chunks: 1 }))
    await waitFor(() => expect(FakeXHR.all).toHaveLength(2))
    expect(FakeXHR.all[1].url).toBe('/api/agents/agt_1/documents?name=two.txt')
  })

  const refusals: { name: string; file: File; status: number; code: string; message: string }[] = [
    { name: 'a PDF (415)', file: new File(['%PDF-1.7'], 'paper.pdf', { type: 'application/pdf' }), status: 415, code: 'unsupported', message: 'paper.pdf is a PDF; only text, Markdown and source files are indexed.' },
    { name: 'a scaffolding file (422)', file: new File(['be nice'], 'AGENTS.md'), status: 422, code: 'invalid_input', message: 'Corral never indexes AGENTS.md: it is an agent-instruction file.' },
    { name: 'a file too large (413)', file: new File(['x'], 'big.txt'), status: 413, code: 'too_large', message: 'big.txt is larger than the 10 MiB a document may be.' },
  ]
  for (const r of refusals) {
    it(`shows ${r.name} refused in the server’s words next to that file, and goes on with the next`, async () => {
      serve(() => [])
      render(<DocumentsTab agent={agentAt('owner')} />)
      await screen.findByText(/^No documents yet/)
      choose(r.file, new File(['ok'], 'ok.txt', { type: 'text/plain' }))
      await waitFor(() => expect(FakeXHR.all).toHaveLength(1))
      FakeXHR.all[0].answer(r.status, { error: { code: r.code, message: r.message } })
      const refused = screen.getByRole('listitem', { name: `Upload of ${r.file.name}` })
      expect((await within(refused).findByRole('alert')).textContent).toBe(r.message)
      await waitFor(() => expect(FakeXHR.all).toHaveLength(2))
      FakeXHR.all[1].answer(201, doc('doc_5', 'ok.txt'))
      const ok = screen.getByRole('listitem', { name: 'Upload of ok.txt' })
      await waitFor(() => expect(ok.textContent).toContain('indexed'))
      expect(within(ok).queryByRole('alert')).toBeNull()
      expect(screen.getAllByRole('alert')).toHaveLength(1)
    })
  }
})

describe('deleting a document', () => {
  it('deletes only after the confirm, then lists again; Cancel sends nothing', async () => {
    let deleted = false
    const calls = serve(
      () => (deleted ? [handbook] : [guide, handbook]),
      (method) => {
        if (method !== 'DELETE') return undefined
        deleted = true
        return [204]
      },
    )
    render(<DocumentsTab agent={agentAt('editor')} />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delete guide.md' }))
    fireEvent.click(screen.getByRole('button', { name: 'Cancel' }))
    expect(calls.filter((c) => c.method === 'DELETE')).toEqual([])
    fireEvent.click(screen.getByRole('button', { name: 'Delete guide.md' }))
    const confirm = screen.getByRole('group', { name: 'Confirm deleting guide.md' })
    expect(confirm.textContent).toContain('This agent will no longer find it.')
    fireEvent.click(within(confirm).getByRole('button', { name: 'Yes, delete' }))
    await waitFor(() => expect(screen.queryByRole('row', { name: /guide\.md/ })).toBeNull())
    expect(calls.filter((c) => c.method === 'DELETE').map((c) => c.url)).toEqual(['/api/agents/agt_1/documents/doc_1'])
  })

  it('shows a refused delete in the server’s words and keeps the row', async () => {
    serve(
      () => [guide],
      (method) => (method === 'DELETE' ? [403, { error: { code: 'forbidden', message: 'Your access to this agent no longer lets you delete its documents.' } }] : undefined),
    )
    render(<DocumentsTab agent={agentAt('editor')} />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delete guide.md' }))
    fireEvent.click(screen.getByRole('button', { name: 'Yes, delete' }))
    expect((await screen.findByRole('alert')).textContent).toBe('Your access to this agent no longer lets you delete its documents.')
    expect(screen.getByRole('row', { name: /guide\.md/ })).toBeTruthy()
  })
})

describe('trying a search', () => {
  function search(answer: unknown) {
    const calls = serve(() => [guide], (method, url) => (method === 'POST' && url === '/api/agents/agt_1/search' ? [200, answer] : undefined))
    render(<DocumentsTab agent={agentAt('viewer')} />)
    fireEvent.change(screen.getByRole('searchbox', { name: 'Search query' }), { target: { value: '  how do I deploy?  ' } })
    fireEvent.click(screen.getByRole('button', { name: 'Search' }))
    return calls
  }

  it('shows each passage with its document, where it lives and its score, and the confidence', async () => {
    const calls = search({
      items: [
        { document_id: 'doc_1', chunk_id: 'chk_1', name: 'guide.md', source: 'private', heading: 'Deploying', text: 'Run make release to deploy.', score: 0.914 },
        { document_id: 'doc_2', chunk_id: 'chk_7', name: 'handbook.md', source: 'library', text: 'Deploys happen on Tuesdays.', score: 0.0164 },
      ],
      confidence: 0.812,
      answerable: true,
      ranker: 'fused',
    })
    const status = await screen.findByText(/passages found/)
    expect(status.textContent).toBe('2 passages found (confidence 0.81) · full-text ranking and embeddings, fused')
    const passages = within(screen.getByRole('list', { name: 'Passages' })).getAllByRole('listitem')
    expect(passages.map((p) => p.querySelector('.passage-meta')?.textContent)).toEqual(['guide.md › Deploying · private · score 0.91', 'handbook.md · library · score 0.016'])
    expect(passages[0].textContent).toContain('Run make release to deploy.')
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.body)).toEqual([{ query: 'how do I deploy?' }])
  })

  const weak = { document_id: 'doc_1', chunk_id: 'chk_1', name: 'guide.md', source: 'private', heading: '', text: 'Unrelated words.', score: 0.01 }
  it('says nothing relevant was found, with the confidence, when no passage came', async () => {
    search({ items: [], confidence: 0.1234, answerable: false, ranker: 'bm25', note: 'embeddings were not used' })
    expect((await screen.findByText(/^Nothing relevant found/)).textContent).toBe('Nothing relevant found (confidence 0.12)')
    expect(screen.getByText('embeddings were not used')).toBeTruthy()
    expect(screen.queryByRole('list', { name: 'Passages' })).toBeNull()
    expect(screen.queryByRole('list', { name: 'Weak passages' })).toBeNull()
  })
  it('shows weak passages below the threshold as weak, never as an answer', async () => {
    search({ items: [weak], confidence: 0.1234, answerable: false, ranker: 'bm25' })
    expect((await screen.findByText(/^Nothing relevant found/)).textContent).toBe('Nothing relevant found (confidence 0.12)')
    expect(screen.getByText(/a run of this agent is not given these passages/)).toBeTruthy()
    expect(screen.queryByRole('list', { name: 'Passages' })).toBeNull()
    const items = within(screen.getByRole('list', { name: 'Weak passages' })).getAllByRole('listitem')
    expect(items).toHaveLength(1)
    expect(items[0].textContent).toContain('Unrelated words.')
  })
})

describe('sources under an answer', () => {
  it('names each document, where it lives and the confidence', () => {
    render(
      <MessageSources
        sources={[
          { document_id: 'doc_1', name: 'guide.md', source: 'private', score: 3.2, confidence: 0.864 },
          { document_id: 'doc_2', name: 'handbook.md', source: 'library', score: 1.1, confidence: 0.5 },
        ]}
      />,
    )
    const items = within(screen.getByRole('list', { name: 'Sources' })).getAllByRole('listitem')
    expect(items.map((i) => i.textContent)).toEqual(['guide.md · private · 0.86', 'handbook.md · library · 0.50'])
  })

  it('shows under the assistant answer that used documents, and nowhere else', async () => {
    const me: User = { id: 'usr_me', email: 'me@example.com', name: 'Me', admin: false, disabled: false, created_at: '2025-01-01T00:00:00Z' }
    const at = '2025-01-01T00:00:00Z'
    serveRoutes((method, url) => {
      if (method !== 'GET') return undefined
      if (url === '/api/agents/agt_1') return [200, agentAt('viewer')]
      if (url === '/api/agents/agt_1/messages') {
        return [
          200,
          {
            items: [
              { id: 'msg_1', role: 'user', content: 'how do I deploy?', author: me, run_id: 'run_1', created_at: at },
              {
                id: 'msg_2',
                role: 'assistant',
                content: 'Run make release.',
                author: null,
                run_id: 'run_1',
                created_at: at,
                sources: [{ document_id: 'doc_1', name: 'guide.md', source: 'private', score: 3.2, confidence: 0.86 }],
              },
              { id: 'msg_3', role: 'user', content: 'thanks', author: me, run_id: 'run_2', created_at: at },
              { id: 'msg_4', role: 'assistant', content: 'You are welcome.', author: null, run_id: 'run_2', created_at: at, sources: [] },
            ],
          },
        ]
      }
      if (url === '/api/agents/agt_1/runs' || url === '/api/agents/agt_1/changes') return [200, { items: [] }]
      return undefined
    })
    render(
      <SessionContext.Provider value={{ user: me, setUser: () => {} }}>
        <AgentPage id="agt_1" />
      </SessionContext.Provider>,
    )
    await screen.findByText('Run make release.')
    const tab = within(screen.getByRole('navigation', { name: 'Agent sections' })).getByRole('link', { name: 'Documents' })
    expect(tab.getAttribute('href')).toBe('/agents/agt_1?tab=documents')
    const thread = within(screen.getByRole('list', { name: 'Thread' })).getAllByRole('listitem').filter((li) => li.classList.contains('msg'))
    const withSources = thread.filter((li) => within(li).queryByRole('list', { name: 'Sources' }) !== null)
    expect(withSources.map((li) => li.querySelector('.msg-body')?.textContent)).toEqual(['Run make release.'])
    expect(within(withSources[0]).getByRole('list', { name: 'Sources' }).textContent).toBe('guide.md · private · 0.86')
  })
})
