// The shared library: documents the agents set to use it can draw on,
// kept apart from any agent's private ones. Anyone signed in publishes;
// a document's author or an admin deletes it (the server says which, as
// can_delete).

import { useEffect } from 'react'
import { api } from '../api'
import { DocumentList, DocumentUploader } from '../Documents'
import { ErrorText, Loading, useLoad } from '../feedback'

export function LibraryPage() {
  const docs = useLoad(() => api.libraryDocuments(), [])
  useEffect(() => {
    document.title = 'Library · Corral'
  }, [])
  return (
    <section>
      <h1>Library</h1>
      <p>
        Anyone on this server can publish to the library. The agents set to use the shared library (in their settings; off for a new agent)
        draw from it, its passages marked to their models as untrusted material written by other people. Private documents, uploaded on an
        agent’s Documents tab, stay with that one agent.
      </p>
      <ErrorText error={docs.error} />
      {docs.loading && !docs.data && <Loading what="the library" />}
      {docs.data && docs.data.length === 0 && <p className="empty">The library is empty.</p>}
      {docs.data && docs.data.length > 0 && (
        <DocumentList
          docs={docs.data}
          label="Library documents"
          deletable={(d) => d.can_delete}
          remove={(d) => api.deleteLibraryDocument(d.id)}
          onDeleted={() => void docs.reload()}
        />
      )}
      <div className="stack import">
        <h2>Publish documents</h2>
        <p className="muted">What you publish here, every agent that uses the shared library can find; only you and the admins can delete it.</p>
        <DocumentUploader upload={(name, body, type, onProgress) => api.uploadLibraryDocument(name, body, type, onProgress)} onUploaded={() => void docs.reload()} />
      </div>
    </section>
  )
}
