-- A credential is bound to the sign-in that issued it: who (issuer,
-- subject), with what role and stores, how strongly (acr) and when. The
-- worker refuses a session that claims a role or stores its credential
-- does not hold, and a tool's requester tier is checked against the acr.
-- Demo rows (readable refs such as cred-ama) work only in dev mode;
-- real refs are unguessable handles.
ALTER TABLE vault.credentials
  ADD COLUMN issuer     text,
  ADD COLUMN subject    text,
  ADD COLUMN role       text,
  ADD COLUMN store_ids  bigint[],
  ADD COLUMN acr        text,
  ADD COLUMN auth_time  timestamptz,
  ADD COLUMN demo       boolean NOT NULL DEFAULT false,
  ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();

UPDATE vault.credentials SET issuer = 'urn:toolgate:demo', subject = user_id, acr = 'pwd', auth_time = now(), demo = true,
  role = CASE user_id WHEN 'kofi' THEN 'area_manager' ELSE 'store_manager' END,
  store_ids = CASE user_id WHEN 'ama' THEN ARRAY[112]::bigint[] WHEN 'efua' THEN ARRAY[118]::bigint[] WHEN 'yaw' THEN ARRAY[131]::bigint[]
                           ELSE ARRAY[110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121]::bigint[] END
WHERE ref IN ('cred-ama', 'cred-efua', 'cred-kofi', 'cred-yaw');
