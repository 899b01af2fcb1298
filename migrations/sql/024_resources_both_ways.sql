-- Resources both ways during a rolling deploy (migration 023 filled a
-- row's resource from the store_id an earlier version wrote): a row this
-- version writes for a store gets its store_id too, so an earlier worker
-- still counts it against its limits and an earlier card UI still lists it,
-- until every process runs this version. And the credential function by
-- resources takes a name of its own: as an overload of issue_for_sign_in,
-- an earlier MCP server's call with untyped parameters matched two
-- functions and was refused.
CREATE OR REPLACE FUNCTION resource_from_store() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.resource_kind IS NULL AND NEW.store_id IS NOT NULL AND NEW.store_id <> 0 THEN
    NEW.resource_kind := 'store';
    NEW.resource_id := NEW.store_id::text;
  ELSIF NEW.store_id IS NULL AND NEW.resource_kind = 'store' AND NEW.resource_id ~ '^[1-9][0-9]{0,17}$' THEN
    NEW.store_id := NEW.resource_id::bigint;
  END IF;
  RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION resources_from_stores() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.resources IS NULL OR NEW.resources = '{}'::jsonb) AND NEW.store_ids IS NOT NULL THEN
    NEW.resources := jsonb_build_object('store', (SELECT coalesce(jsonb_agg(s::text), '[]') FROM unnest(NEW.store_ids) s));
  ELSIF NEW.store_ids IS NULL AND jsonb_typeof(NEW.resources -> 'store') = 'array'
        AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(NEW.resources -> 'store') e WHERE e !~ '^[1-9][0-9]{0,17}$') THEN
    NEW.store_ids := ARRAY(SELECT e::bigint FROM jsonb_array_elements_text(NEW.resources -> 'store') e);
  END IF;
  RETURN NEW;
END
$$;

-- The audit log is append-only: its existing rows get their resource by
-- the table rewrite of ALTER COLUMN ... USING, which no UPDATE trigger
-- sees and which changes no value a row recorded.
ALTER FUNCTION vault.issue_for_sign_in(text, text, text, text, jsonb, text, timestamptz) RENAME TO issue_for_sign_in_resources;
