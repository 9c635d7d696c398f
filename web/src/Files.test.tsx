// The files tab lists dotfiles like any file, offers the download to every
// level, and delete and import only to editors and owners; a delete asks
// first, and a refusal reads in the server's words.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import { FileBrowser } from './Files'
import { agentAt, serveRoutes, stubXHR, FakeXHR, type Answer } from './testkit'
import type { Level } from './types'

const root = {
  type: 'dir',
  path: '',
  size: 0,
  entries: [
    { name: '.github', type: 'dir', size: 0 },
    { name: '.gitignore', type: 'file', size: 13 },
    { name: 'main.go', type: 'file', size: 42 },
  ],
}

function serve(extra: (method: string, url: string) => Answer | undefined = () => undefined) {
  return serveRoutes((method, url) => {
    const x = extra(method, url)
    if (x) return x
    if (method === 'GET' && url === '/api/agents/agt_1/files?path=') return [200, root]
    return undefined
  })
}

afterEach(() => vi.unstubAllGlobals())

describe('FileBrowser', () => {
  const levels: { level: Level; edits: boolean }[] = [
    { level: 'viewer', edits: false },
    { level: 'runner', edits: false },
    { level: 'editor', edits: true },
    { level: 'owner', edits: true },
  ]
  for (const c of levels) {
    it(`shows a ${c.level} dotfiles and the download${c.edits ? ', delete and import' : ', nothing that changes files'}`, async () => {
      serve()
      render(<FileBrowser agent={agentAt(c.level)} path="" />)
      expect(await screen.findByRole('link', { name: '.gitignore' })).toBeTruthy()
      expect(screen.getByRole('link', { name: '.github/' })).toBeTruthy()
      const download = screen.getByRole('link', { name: 'Download workspace (.tar.gz)' })
      expect(download.getAttribute('href')).toBe('/api/agents/agt_1/workspace/archive')
      expect(screen.queryAllByRole('button', { name: /^Delete / }).length).toBe(c.edits ? 3 : 0)
      expect(screen.queryByRole('button', { name: 'Import' }) !== null).toBe(c.edits)
      expect(screen.queryByLabelText('Archive file') !== null).toBe(c.edits)
    })
  }

  it('deletes a file only after the confirm, then lists again', async () => {
    let deleted = false
    const calls = serve((method, url) => {
      if (method === 'DELETE') {
        deleted = true
        return [204]
      }
      if (deleted && url === '/api/agents/agt_1/files?path=') return [200, { ...root, entries: root.entries.filter((e) => e.name !== '.gitignore') }]
      return undefined
    })
    render(<FileBrowser agent={agentAt('editor')} path="" />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delete .gitignore' }))
    expect(calls.filter((c) => c.method === 'DELETE')).toEqual([])
    const confirm = screen.getByRole('group', { name: 'Confirm deleting .gitignore' })
    fireEvent.click(within(confirm).getByRole('button', { name: 'Yes, delete' }))
    await waitFor(() => expect(screen.queryByRole('link', { name: '.gitignore' })).toBeNull())
    expect(calls.filter((c) => c.method === 'DELETE').map((c) => c.url)).toEqual(['/api/agents/agt_1/files?path=.gitignore'])
  })

  it('deletes a folder with recursive=true, and Cancel sends nothing', async () => {
    const calls = serve((method) => (method === 'DELETE' ? [204] : undefined))
    render(<FileBrowser agent={agentAt('owner')} path="" />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delete main.go' }))
    fireEvent.click(screen.getByRole('button', { name: 'Cancel' }))
    expect(screen.queryByRole('group', { name: /^Confirm/ })).toBeNull()
    fireEvent.click(screen.getByRole('button', { name: 'Delete .github' }))
    expect(screen.getByText('Delete the folder .github and everything in it?')).toBeTruthy()
    fireEvent.click(screen.getByRole('button', { name: 'Yes, delete' }))
    await waitFor(() => expect(calls.filter((c) => c.method === 'DELETE').map((c) => c.url)).toEqual(['/api/agents/agt_1/files?path=.github&recursive=true']))
  })

  it('shows a refused delete in the server’s words', async () => {
    serve((method) => (method === 'DELETE' ? [409, { error: { code: 'conflict', message: 'main.go is being changed by a run; try again when it ends.' } }] : undefined))
    render(<FileBrowser agent={agentAt('editor')} path="" />)
    fireEvent.click(await screen.findByRole('button', { name: 'Delete main.go' }))
    fireEvent.click(screen.getByRole('button', { name: 'Yes, delete' }))
    expect((await screen.findByRole('alert')).textContent).toBe('main.go is being changed by a run; try again when it ends.')
    expect(screen.getByRole('link', { name: 'main.go' })).toBeTruthy()
  })
})

describe('ImportPanel on the files tab', () => {
  function choose(name: string, content = 'x') {
    const input = screen.getByLabelText('Archive file') as HTMLInputElement
    fireEvent.change(input, { target: { files: [new File([content], name)] } })
  }

  it('uploads with a real progress bar, then says what was imported', async () => {
    serve()
    stubXHR()
    render(<FileBrowser agent={agentAt('editor')} path="" />)
    await screen.findByRole('link', { name: '.gitignore' })
    choose('project.tar.gz', 'x'.repeat(2000))
    expect(screen.getByText('project.tar.gz')).toBeTruthy()
    fireEvent.click(screen.getByRole('button', { name: 'Import' }))
    await waitFor(() => expect(FakeXHR.last).toBeDefined())
    const xhr = FakeXHR.last!
    expect([xhr.method, xhr.url, xhr.headers['Content-Type']]).toEqual(['POST', '/api/agents/agt_1/workspace/import', 'application/gzip'])
    const bar = () => screen.getByRole('progressbar', { name: 'Upload progress' }) as HTMLProgressElement
    expect(bar().value).toBe(0)
    xhr.progress(500, 2000)
    await waitFor(() => expect(bar().value).toBe(25))
    expect(screen.getByText(/^25% · 500 B of 2\.0 KiB$/)).toBeTruthy()
    xhr.progress(2000, 2000)
    await screen.findByText('Uploaded; the server is unpacking it…')
    xhr.answer(200, { files: 3, bytes: 2048 })
    expect((await screen.findByText(/^Imported 3 files/)).textContent).toBe('Imported 3 files (2.0 KiB).')
    expect(screen.queryByRole('progressbar')).toBeNull()
  })

  const refusals: { name: string; status: number; message: string }[] = [
    { name: 'an unsafe entry', status: 400, message: 'The archive entry ../../etc/passwd leaves the workspace; nothing was imported.' },
    { name: 'a limit', status: 413, message: 'The archive holds more than 100000 files (the file-count limit).' },
  ]
  for (const r of refusals) {
    it(`shows ${r.name} refused in the server’s words`, async () => {
      serve()
      stubXHR()
      render(<FileBrowser agent={agentAt('owner')} path="" />)
      await screen.findByRole('link', { name: '.gitignore' })
      choose('bad.zip')
      fireEvent.click(screen.getByRole('button', { name: 'Import' }))
      await waitFor(() => expect(FakeXHR.last).toBeDefined())
      FakeXHR.last!.answer(r.status, { error: { code: r.status === 413 ? 'too_large' : 'invalid_input', message: r.message } })
      expect((await screen.findByRole('alert')).textContent).toBe(r.message)
    })
  }

  it('packs a dropped folder into a tar and uploads it as application/x-tar', async () => {
    serve()
    stubXHR()
    render(<FileBrowser agent={agentAt('editor')} path="" />)
    await screen.findByRole('link', { name: '.gitignore' })
    const file = (name: string, content: string) => ({ isFile: true, isDirectory: false, name, file: (ok: (f: File) => void) => ok(new File([content], name)) })
    const kids = [file('.env.example', 'KEY=\n'), file('main.go', 'package main\n')]
    const folder = { isFile: false, isDirectory: true, name: 'project', createReader: () => ({ readEntries: (ok: (e: unknown[]) => void) => ok(kids.splice(0)) }) }
    fireEvent.drop(screen.getByRole('group', { name: 'Archive or folder to import' }), {
      dataTransfer: { items: [{ kind: 'file', webkitGetAsEntry: () => folder }], files: [] },
    })
    expect(await screen.findByText('folder project (2 files, packed as a tar)')).toBeTruthy()
    fireEvent.click(screen.getByRole('button', { name: 'Import' }))
    await waitFor(() => expect(FakeXHR.last).toBeDefined())
    expect(FakeXHR.last!.headers['Content-Type']).toBe('application/x-tar')
    const body = FakeXHR.last!.body as Blob
    // Two files of one block each, their two headers, and the two end blocks.
    expect(body.size).toBe(6 * 512)
  })

  it('refuses a file that is not an archive before sending it', async () => {
    serve()
    stubXHR()
    render(<FileBrowser agent={agentAt('editor')} path="" />)
    await screen.findByRole('link', { name: '.gitignore' })
    choose('notes.txt')
    expect((await screen.findByRole('alert')).textContent).toMatch(/^notes\.txt is not an archive we can import\./)
    expect((screen.getByRole('button', { name: 'Import' }) as HTMLButtonElement).disabled).toBe(true)
    expect(FakeXHR.all).toEqual([])
  })
})
