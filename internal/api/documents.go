package api

import (
	"net/http"

	"corral"
	"corral/internal/service"
)

func (s *Server) documentsService() (*service.Documents, error) {
	if s.documents == nil {
		return nil, corral.Errorf(corral.EUNAVAIL, "this server has no document stores")
	}
	return s.documents, nil
}

type documentView struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Source    string       `json:"source"`
	Bytes     int64        `json:"bytes"`
	Chunks    int          `json:"chunks"`
	Embedded  bool         `json:"embedded"`
	Author    *userRefView `json:"author"`
	CreatedAt string       `json:"created_at"`
	CanDelete bool         `json:"can_delete"`
}

func viewDocument(d corral.Document, canDelete bool) documentView {
	v := documentView{ID: d.ID, Name: d.Name, Source: d.Source, Bytes: d.Bytes, Chunks: d.Chunks,
		Embedded: d.Embedded, CreatedAt: rfc3339(d.CreatedAt), CanDelete: canDelete}
	if d.Author != nil {
		v.Author = &userRefView{ID: d.Author.ID, Name: d.Author.Name}
	}
	return v
}

func listed(d service.ListedDocument) documentView { return viewDocument(d.Document, d.CanDelete) }

type passageView struct {
	DocumentID string  `json:"document_id"`
	ChunkID    string  `json:"chunk_id"`
	Name       string  `json:"name"`
	Source     string  `json:"source"`
	Heading    string  `json:"heading"`
	Text       string  `json:"text"`
	Score      float64 `json:"score"`
}

type retrievalView struct {
	Items      []passageView `json:"items"`
	Confidence float64       `json:"confidence"`
	Answerable bool          `json:"answerable"`
	Ranker     string        `json:"ranker"`
	Note       string        `json:"note,omitempty"`
}

func viewRetrieval(r corral.Retrieval) retrievalView {
	v := retrievalView{Items: []passageView{}, Confidence: r.Confidence, Answerable: r.Answerable, Ranker: r.Ranker, Note: r.Note}
	for _, p := range r.Items {
		v.Items = append(v.Items, passageView{DocumentID: p.DocumentID, ChunkID: p.ChunkID, Name: p.Name,
			Source: p.Source, Heading: p.Heading, Text: p.Text, Score: p.Score})
	}
	return v
}

func (s *Server) uploadDocument(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	d, err := s.documentsService()
	if err != nil {
		return err
	}
	doc, err := d.Upload(r.Context(), actor, r.PathValue("id"), r.URL.Query().Get("name"), r.Body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewDocument(doc, true))
	return nil
}

func (s *Server) listDocuments(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	d, err := s.documentsService()
	if err != nil {
		return err
	}
	docs, err := d.Documents(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(docs, listed))
	return nil
}

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	d, err := s.documentsService()
	if err != nil {
		return err
	}
	if err := d.DeleteDocument(r.Context(), actor, r.PathValue("id"), r.PathValue("doc_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) publishDocument(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	d, err := s.documentsService()
	if err != nil {
		return err
	}
	doc, err := d.Publish(r.Context(), actor, r.URL.Query().Get("name"), r.Body)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewDocument(doc, true))
	return nil
}

func (s *Server) listLibrary(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	d, err := s.documentsService()
	if err != nil {
		return err
	}
	docs, err := d.Library(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(docs, func(d service.ListedDocument) documentView { return viewDocument(d.Document, d.CanDelete) }))
	return nil
}

func (s *Server) unpublishDocument(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	d, err := s.documentsService()
	if err != nil {
		return err
	}
	if err := d.Unpublish(r.Context(), actor, r.PathValue("doc_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type searchRequest struct {
	Query string `json:"query"`
	K     int    `json:"k,omitempty"`
}

func (s *Server) searchDocuments(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	d, err := s.documentsService()
	if err != nil {
		return err
	}
	var req searchRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	res, err := d.Search(r.Context(), actor, r.PathValue("id"), req.Query, req.K)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewRetrieval(res))
	return nil
}
