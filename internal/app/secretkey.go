package app

import (
	"context"
	"log/slog"
	"path/filepath"

	"corral"
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
	kept, err := db.KeyCheck(ctx, "secret", key.Seal([]byte("corral"), ad))
	if err != nil {
		return err
	}
	if _, err := key.Open(kept, ad); err != nil {
		return corral.Errorf(corral.EINVALID, "this control's secret key is not the one the other controls serving from this database use: "+
			"give every control the same CORRAL_SECRET_KEY (or the same DATA/%s)", secrets.KeyFile)
	}
	return nil
}
