-- The Mangrove demo upstream: its own schema, seeded so that everyone gets
-- the numbers of DESIGN.md. Days are stored as offsets from today so the
-- demo never goes stale.
CREATE SCHEMA mangrove;

CREATE TABLE mangrove.users (
  user_id              text PRIMARY KEY,
  name                 text NOT NULL,
  role                 text NOT NULL,
  client_secret_sha256 text NOT NULL
);
CREATE TABLE mangrove.stores (
  store_id bigint PRIMARY KEY,
  name     text NOT NULL,
  area     text NOT NULL,
  x_km     numeric NOT NULL,
  y_km     numeric NOT NULL
);
CREATE TABLE mangrove.user_stores (
  user_id  text NOT NULL REFERENCES mangrove.users,
  store_id bigint NOT NULL REFERENCES mangrove.stores,
  PRIMARY KEY (user_id, store_id)
);
CREATE TABLE mangrove.articles (
  article_id bigint PRIMARY KEY,
  name       text NOT NULL,
  unit       text NOT NULL,
  cost_cents bigint NOT NULL
);
CREATE TABLE mangrove.stock (
  store_id   bigint NOT NULL REFERENCES mangrove.stores,
  article_id bigint NOT NULL REFERENCES mangrove.articles,
  cases      integer NOT NULL CHECK (cases >= 0),
  PRIMARY KEY (store_id, article_id)
);
CREATE TABLE mangrove.deliveries (
  delivery_id  text PRIMARY KEY,
  store_id     bigint NOT NULL REFERENCES mangrove.stores,
  supplier     text NOT NULL,
  day_offset   integer NOT NULL,
  expected     time NOT NULL,
  status       text NOT NULL,
  summary      text NOT NULL
);
CREATE TABLE mangrove.grns (
  grn_number  text PRIMARY KEY,
  store_id    bigint NOT NULL REFERENCES mangrove.stores,
  delivery_id text NOT NULL,
  day_offset  integer NOT NULL,
  lines       jsonb NOT NULL
);
CREATE TABLE mangrove.procedures (
  procedure_id integer PRIMARY KEY,
  title        text NOT NULL,
  body         text NOT NULL
);
CREATE TABLE mangrove.tasks (
  task_id         bigserial PRIMARY KEY,
  store_id        bigint NOT NULL REFERENCES mangrove.stores,
  title           text NOT NULL,
  details         text NOT NULL DEFAULT '',
  priority        text NOT NULL,
  due_date        date,
  created_by      text NOT NULL,
  idempotency_key text NOT NULL UNIQUE,
  created_at      timestamptz NOT NULL DEFAULT now()
);

INSERT INTO mangrove.users VALUES
  ('ama', 'Ama Mensah', 'store_manager', encode(sha256('demo-secret-ama'), 'hex')),
  ('efua', 'Efua Owusu', 'store_manager', encode(sha256('demo-secret-efua'), 'hex')),
  ('kofi', 'Kofi Boateng', 'area_manager', encode(sha256('demo-secret-kofi'), 'hex')),
  ('yaw', 'Yaw Asante', 'store_manager', encode(sha256('demo-secret-yaw'), 'hex'));

-- Area East: stores 110..121 on a line, 112 at 0 km, 118 2.4 km away.
INSERT INTO mangrove.stores
SELECT id, 'Mangrove ' || id, 'East',
       CASE id WHEN 112 THEN 0 WHEN 118 THEN 2.4 ELSE 3 + (id - 110) * 0.7 END, 0
FROM generate_series(110, 121) AS id;
INSERT INTO mangrove.stores VALUES (131, 'Mangrove 131', 'West', 40, 12);

INSERT INTO mangrove.user_stores VALUES ('ama', 112), ('efua', 118), ('yaw', 131);
INSERT INTO mangrove.user_stores SELECT 'kofi', id FROM generate_series(110, 121) AS id;

INSERT INTO mangrove.articles VALUES
  (40211, 'UHT milk 1 L, case of 12', 'case', 960),
  (40207, 'Fresh milk 1 L', 'case', 1140),
  (40388, 'Lactose-free milk 1 L', 'case', 1620),
  (50110, 'Rice 5 kg', 'bag', 750);

INSERT INTO mangrove.stock
SELECT s.store_id, a.article_id,
       CASE WHEN a.article_id = 40211 AND s.store_id = 112 THEN 6
            WHEN a.article_id = 40211 AND s.store_id = 118 THEN 200
            WHEN a.article_id = 40211 THEN 20
            ELSE 30 + (s.store_id % 7) * 5 END
FROM mangrove.stores s CROSS JOIN mangrove.articles a;

INSERT INTO mangrove.deliveries VALUES
  ('DL-5501', 112, 'Volta Dairies', 1, '06:30', 'scheduled', '30 cases UHT milk 1 L, 12 cases Fresh milk 1 L'),
  ('DL-5502', 112, 'Akosombo Grains', 1, '09:00', 'scheduled', '40 bags Rice 5 kg'),
  ('DL-5503', 112, 'Volta Dairies', 3, '06:30', 'scheduled', '20 cases Lactose-free milk 1 L'),
  ('DL-5490', 112, 'Volta Dairies', 0, '06:30', 'delivered', '24 cases UHT milk 1 L'),
  ('DL-5601', 118, 'Volta Dairies', 1, '07:15', 'scheduled', '60 cases UHT milk 1 L'),
  ('DL-5701', 131, 'Akosombo Grains', 2, '10:00', 'scheduled', '25 bags Rice 5 kg');
INSERT INTO mangrove.deliveries
SELECT 'DL-58' || lpad(g::text, 2, '0'), 112, 'Coastal Foods', 2 + g / 4, '08:00'::time + (g % 4) * interval '1 hour',
       'scheduled', g || ' cartons of mixed dry goods'
FROM generate_series(1, 14) AS g;

INSERT INTO mangrove.grns VALUES
  ('GRN-88213', 112, 'DL-5490', 0, '[{"articleId": 40211, "article": "UHT milk 1 L, case of 12", "ordered": 30, "received": 24, "note": "6 cases short"}]'),
  ('GRN-88190', 118, 'DL-5588', -1, '[{"articleId": 40211, "article": "UHT milk 1 L, case of 12", "ordered": 60, "received": 60, "note": ""}]');

INSERT INTO mangrove.procedures VALUES
  (1, 'Cold chain breach', 'If a chiller reads above 5 °C for more than 2 hours, move dairy to the walk-in cooler, log the reading, and create a task for maintenance. Discard any product that stayed above 8 °C. Tell the area manager the same day.'),
  (2, 'Receiving a delivery', 'Count every case against the delivery note before signing. Record shortages on the goods received note. Never sign for sealed pallets you have not counted.'),
  (3, 'Cash office close', 'Two people count the tills. Differences over $20.00 are reported to the area manager before the safe is closed.'),
  (4, 'Stock transfer between stores', 'Transfers move stock between stores of one area. The receiving store manager requests; the value decides who approves: store managers up to $500.00, area managers above.'),
  (5, 'Spill on the shop floor', 'Cone the area, clean with the yellow kit, and record the time on the floor log.');
-- Long procedures, so search answers page and get cut.
INSERT INTO mangrove.procedures
SELECT 100 + g, 'Milk handling guide, part ' || g,
       repeat('Milk handling step ' || g || ': keep cases upright, rotate stock first in first out, check dates daily and record the check. ', 12)
FROM generate_series(1, 24) AS g;
