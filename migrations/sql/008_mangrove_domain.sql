-- The Mangrove tools as the domain designed them: tasks are a kind, an
-- article and a day (the title is written by the system), and deliveries
-- have the domain's statuses, a day and, once received, a GRN id.
ALTER TABLE mangrove.tasks
  ADD COLUMN kind text CHECK (kind IN ('recount', 'shelf_check', 'expiry_check', 'call_supplier', 'pricing_desk')),
  ADD COLUMN article_id bigint REFERENCES mangrove.articles,
  ADD COLUMN due_by text CHECK (due_by IN ('today', 'tomorrow', 'this_week')),
  ADD COLUMN note text NOT NULL DEFAULT '';

ALTER TABLE mangrove.deliveries ADD COLUMN grn_id text;
UPDATE mangrove.deliveries SET status = CASE status WHEN 'delivered' THEN 'received' ELSE 'expected' END;
UPDATE mangrove.deliveries SET grn_id = 'GRN-88213' WHERE delivery_id = 'DL-5490';
-- Tomorrow is busy (14 cartons of dry goods as well), so its answer pages.
UPDATE mangrove.deliveries SET day_offset = 1 WHERE delivery_id LIKE 'DL-58%';
ALTER TABLE mangrove.deliveries ADD CONSTRAINT deliveries_status CHECK (status IN ('expected', 'on_the_way', 'arrived', 'received', 'delayed'));

INSERT INTO mangrove.articles VALUES
  (60010, 'White bread loaf 800 g', 'tray', 1200),
  (60012, 'Wholemeal bread loaf 800 g', 'tray', 1350);
INSERT INTO mangrove.stock
SELECT s.store_id, a.article_id, 10 + (s.store_id % 5) * 3
FROM mangrove.stores s CROSS JOIN (VALUES (60010), (60012)) AS a(article_id);

INSERT INTO mangrove.deliveries (delivery_id, store_id, supplier, day_offset, expected, status, summary, grn_id) VALUES
  ('DL-5480', 112, 'Akosombo Bakery', -1, '05:45', 'received', '30 trays White bread loaf 800 g', 'GRN-88201'),
  ('DL-5510', 112, 'Akosombo Bakery', 0, '11:00', 'on_the_way', '30 trays White bread loaf 800 g, 10 trays Wholemeal bread loaf 800 g', NULL),
  ('DL-5511', 112, 'Volta Dairies', 0, '16:00', 'delayed', '20 cases Fresh milk 1 L (was due 07:00)', NULL),
  ('DL-5512', 112, 'Coastal Foods', 0, '08:15', 'arrived', '12 cartons of mixed dry goods, waiting to be counted', NULL);
INSERT INTO mangrove.grns VALUES
  ('GRN-88201', 112, 'DL-5480', -1, '[{"articleId": 60010, "article": "White bread loaf 800 g", "ordered": 30, "received": 28, "note": "2 trays crushed"}]');
