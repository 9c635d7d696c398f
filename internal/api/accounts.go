package api

import (
	"net/http"
	"time"

	"corral"
	"corral/internal/service"
)

type signupRequest struct {
	Email    string `json:"email"`
	Name     string `json:"name"`
	Password string `json:"password"`
	Invite   string `json:"invite,omitempty"`
}

type userAnswer struct {
	User userView `json:"user"`
}

func (s *Server) signup(w http.ResponseWriter, r *http.Request, _ corral.User) error {
	var req signupRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	u, token, err := s.accounts.Signup(r.Context(), service.SignupInput{Email: req.Email, Name: req.Name, Password: req.Password, Invite: req.Invite}, s.clientAddr(r))
	if err != nil {
		return err
	}
	s.setSession(w, r, token)
	writeJSON(w, http.StatusCreated, userAnswer{viewUser(u)})
	return nil
}

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, _ corral.User) error {
	var req loginRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	u, token, err := s.accounts.Login(r.Context(), req.Email, req.Password, s.clientAddr(r))
	if err != nil {
		return err
	}
	s.setSession(w, r, token)
	writeJSON(w, http.StatusOK, userAnswer{viewUser(u)})
	return nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ corral.User) error {
	if c, err := r.Cookie(CookieName); err == nil {
		if err := s.accounts.Logout(r.Context(), c.Value); err != nil {
			return err
		}
	}
	http.SetCookie(w, s.cookie(r, "", -1))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setSession(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, s.cookie(r, token, s.accounts.SessionTTL()))
}

func (s *Server) cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	c := &http.Cookie{
		Name: CookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: s.cfg.SecureCookies || r.TLS != nil,
	}
	if maxAge > 0 {
		c.Expires = time.Now().Add(time.Duration(maxAge) * time.Second)
	}
	return c
}

func (s *Server) me(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	writeJSON(w, http.StatusOK, userAnswer{viewUser(actor)})
	return nil
}

type tokenRequest struct {
	Name string `json:"name"`
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	var req tokenRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	t, secret, err := s.accounts.CreateToken(r.Context(), actor, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewToken(t, secret))
	return nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	ts, err := s.accounts.Tokens(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(ts, func(t corral.APIToken) tokenView { return viewToken(t, "") }))
	return nil
}

func (s *Server) deleteToken(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	if err := s.accounts.DeleteToken(r.Context(), actor, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	us, err := s.accounts.Users(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(us, viewListedUser))
	return nil
}

func (s *Server) disableUser(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	return s.setDisabled(w, r, actor, true)
}

func (s *Server) enableUser(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	return s.setDisabled(w, r, actor, false)
}

func (s *Server) setDisabled(w http.ResponseWriter, r *http.Request, actor corral.User, disabled bool) error {
	u, err := s.accounts.SetDisabled(r.Context(), actor, r.PathValue("id"), disabled)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, userAnswer{viewUser(u)})
	return nil
}

func (s *Server) createInvite(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	inv, token, err := s.accounts.CreateInvite(r.Context(), actor)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, inviteView{ID: inv.ID, Token: token, ExpiresAt: rfc3339(inv.ExpiresAt)})
	return nil
}
