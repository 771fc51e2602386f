-- A stored event stays in its heap row up to a page (toast_tuple_target
-- 8160 bytes) instead of moving to TOAST once its row passes about 2 KB.
-- A typical artifact revision or message (a few KB of JSON) is then read
-- with its row, not with three more TOAST rows found through the TOAST
-- index, and written as one row. raw stays uncompressed (STORAGE
-- EXTERNAL); events larger than a page still go to TOAST. Rows stored
-- before this migration keep their place until they are rewritten.
ALTER TABLE events SET (toast_tuple_target = 8160);
