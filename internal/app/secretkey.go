package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"

	"corral"
	"corral/internal/proxy"
	"corral/internal/secrets"
	"corral/internal/store"
)

// loadSecretKey returns the key that seals code-host credentials: from
// CORRAL_SECRET_KEY when it is set (then no file is made), else from
// DATA/secret.key, made on the first start. It fails closed (a key file
// others may read, or of the wrong length, stops the server) and never
// logs the key: only where it came from.
func loadSecretKey(c Config, log *slog.Logger) (*secrets.Key, error) {
	if c.SecretKey != "" {
		key, err := secrets.ParseKey(c.SecretKey)
		if err != nil {
			return nil, err
		}
		log.Info("secret key from CORRAL_SECRET_KEY")
		return key, nil
	}
	path := filepath.Join(c.Data, secrets.KeyFile)
	key, created, err := secrets.LoadKeyFile(path)
	if err != nil {
		return nil, err
	}
	if created {
		log.Warn("created a new secret key: back it up apart from the database, since stored credentials cannot be opened without it", "path", path)
	} else {
		log.Info("secret key loaded", "path", path)
	}
	return key, nil
}

// checkSharedKey refuses a key other than the one the shared store's
// secrets were sealed with: a control with another (a replica whose data
// directory made a key of its own) could open none of them, and would
// seal new ones that the others cannot open. The first control to serve
// from the store leaves a value sealed with its key; every other must
// open it.
func checkSharedKey(ctx context.Context, db *store.DB, key *secrets.Key) error {
	ad := secrets.AD("key-check", "secret")
	kept, err := db.SharedKey(ctx, "secret-key-check", key.Seal([]byte("corral"), ad))
	if err != nil {
		return err
	}
	if _, err := key.Open(kept, ad); err != nil {
		return corral.Errorf(corral.EINVALID, "this control's secret key is not the one the other controls serving from this database use: "+
			"give every control the same CORRAL_SECRET_KEY (or the same DATA/%s)", secrets.KeyFile)
	}
	return nil
}

// sharedCA is the egress CA of every control sharing the store: the first
// one's, kept in the store with its key sealed by the secret key. A run
// trusts the CA its control installed when it started, so a control that
// takes it over must sign with the same one. local (this control's own,
// in its data directory) is kept if it is the first.
func sharedCA(ctx context.Context, db *store.DB, key *secrets.Key, local *proxy.CA) (*proxy.CA, error) {
	keyPEM, err := local.KeyPEM()
	if err != nil {
		return nil, corral.Internal("egress CA", err)
	}
	ad := secrets.AD("shared-key", "egress-ca")
	mine, err := json.Marshal(sharedCAValue{Cert: local.CertPEM(), Key: key.Seal(keyPEM, ad)})
	clear(keyPEM)
	if err != nil {
		return nil, corral.Internal("egress CA", err)
	}
	kept, err := db.SharedKey(ctx, "egress-ca", mine)
	if err != nil {
		return nil, err
	}
	var v sharedCAValue
	if err := json.Unmarshal(kept, &v); err != nil {
		return nil, corral.Internal("egress CA", fmt.Errorf("the store's: %w", err))
	}
	if bytes.Equal(v.Cert, local.CertPEM()) {
		return local, nil
	}
	keyPEM, err = key.Open(v.Key, ad)
	if err != nil {
		return nil, corral.Internal("egress CA", fmt.Errorf("the store's key: %w", err))
	}
	defer clear(keyPEM)
	ca, err := proxy.ParseCA(v.Cert, keyPEM)
	if err != nil {
		return nil, corral.Internal("egress CA", fmt.Errorf("the store's: %w", err))
	}
	return ca, nil
}

// sharedCAValue is the egress CA as the store keeps it.
type sharedCAValue struct {
	Cert []byte `json:"cert"` // PEM
	Key  []byte `json:"key"`  // the key's PEM, sealed
}
