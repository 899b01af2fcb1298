-- Stock transfers between stores of one area, for request_stock_transfer.
CREATE TABLE mangrove.transfers (
  transfer_id     bigserial PRIMARY KEY,
  article_id      bigint NOT NULL REFERENCES mangrove.articles,
  quantity        integer NOT NULL CHECK (quantity > 0),
  from_store_id   bigint NOT NULL REFERENCES mangrove.stores,
  to_store_id     bigint NOT NULL REFERENCES mangrove.stores,
  reason          text NOT NULL,
  value_cents     bigint NOT NULL,
  requested_by    text NOT NULL,
  idempotency_key text NOT NULL UNIQUE,
  created_at      timestamptz NOT NULL DEFAULT now(),
  CHECK (from_store_id <> to_store_id)
);
