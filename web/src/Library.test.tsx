// The library page: in the main navigation, says who draws on it, lists
// its documents with Delete only where the server says can_delete, and
// publishes uploads to the library, not to an agent.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import { App } from './App'
import { LibraryPage } from './pages/Library'
import { FakeXHR, serveRoutes, stubXHR, type Answer } from './testkit'
import type { Doc } from './types'

function doc(id: string, name: string, can_delete: boolean, author = 'Alice'): Doc {
  return { id, name, source: 'library', bytes: 100, chunks: 2, embedded: false, author: { id: `usr_${author}`, name: author }, created_at: '2025-01-01T00:00:00Z', can_delete }
}

const mine = doc('doc_1', 'handbook.md', true)
const theirs = doc('doc_2', 'style.md', false, 'Bea')

function serve(list: () => Doc[], extra: (method: string, url: string) => Answer | undefined = () => undefined) {
  return serveRoutes((method, url) => {
    const x = extra(method, url)
    if (x) return x
    if (method === 'GET' && url === '/api/library/documents') return [200, { items: list() }]
    return undefined
  })
}

beforeEach(() => stubXHR())
afterEach(() => {
  vi.unstubAllGlobals()
  window.history.replaceState(null, '', '/')
})

describe('LibraryPage', () => {
  it('says which agents draw on it, as untrusted, and that private documents stay with one agent', async () => {
    serve(() => [])
    render(<LibraryPage />)
    expect(await screen.findByText('The library is empty.')).toBeTruthy()
    expect(document.body.textContent).toContain(
      'The agents set to use the shared library (in their settings; off for a new agent) draw from it, its passages marked to their models as untrusted material written by other people. Private documents, uploaded on an agent’s Documents tab, stay with that one agent.',
    )
  })

  it('offers Delete only on the documents the server says the caller may delete', async () => {
    serve(() => [mine, theirs])
    render(<LibraryPage />)
    const table = await screen.findByRole('table', { name: 'Library documents' })
    expect(within(table).getByRole('row', { name: /style\.md/ }).textContent).toContain('Bea')
    expect(screen.queryAllByRole('button', { name: /^Delete / }).map((b) => b.getAttribute('aria-label'))).toEqual(['Delete handbook.md'])
  })

  it('deletes from the library after the confirm, then lists again', async () => {
    let deleted = false
    const calls = serve(
      () => (deleted ? [theirs] : [mine, theirs]),
      (method) => {
        if (method !== 'DELETE') return undefined
        deleted = true
        return [204]
      },
    )
    render(<LibraryPage />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delete handbook.md' }))
    const confirm = screen.getByRole('group', { name: 'Confirm deleting handbook.md' })
    expect(confirm.textContent).toContain('from the library? No agent will find it any more.')
    fireEvent.click(within(confirm).getByRole('button', { name: 'Yes, delete' }))
    await waitFor(() => expect(screen.queryByRole('row', { name: /handbook\.md/ })).toBeNull())
    expect(calls.filter((c) => c.method === 'DELETE').map((c) => c.url)).toEqual(['/api/library/documents/doc_1'])
  })

  it('publishes an upload to the library with its progress, then lists it', async () => {
    let list: Doc[] = []
    serve(() => list)
    render(<LibraryPage />)
    await screen.findByText('The library is empty.')
    fireEvent.change(screen.getByLabelText('Document files'), { target: { files: [new File(['# Handbook\n'], 'handbook.md', { type: 'text/markdown' })] } })
    await waitFor(() => expect(FakeXHR.all).toHaveLength(1))
    const xhr = FakeXHR.last!
    expect([xhr.method, xhr.url]).toEqual(['POST', '/api/library/documents?name=handbook.md'])
    xhr.progress(6, 12)
    await waitFor(() => expect((screen.getByRole('progressbar', { name: 'Upload progress of handbook.md' }) as HTMLProgressElement).value).toBe(50))
    list = [mine]
    xhr.answer(201, mine)
    await screen.findByRole('row', { name: /handbook\.md/ })
    expect(screen.getByRole('listitem', { name: 'Upload of handbook.md' }).textContent).toContain('indexed: 2 passages')
  })
})

describe('the app’s navigation', () => {
  it('links the library from the main navigation and shows it at /library', async () => {
    serveRoutes((method, url) => {
      if (method === 'GET' && url === '/api/me') return [200, { user: { id: 'usr_me', email: 'me@example.com', name: 'Me', admin: false } }]
      if (method === 'GET' && url === '/api/library/documents') return [200, { items: [theirs] }]
      return undefined
    })
    window.history.replaceState(null, '', '/library')
    render(<App />)
    const link = within(await screen.findByRole('navigation', { name: 'Main' })).getByRole('link', { name: 'Library' })
    expect(link.getAttribute('href')).toBe('/library')
    expect(link.getAttribute('aria-current')).toBe('page')
    expect(await screen.findByRole('heading', { name: 'Library', level: 1 })).toBeTruthy()
    await screen.findByRole('row', { name: /style\.md/ })
  })
})
