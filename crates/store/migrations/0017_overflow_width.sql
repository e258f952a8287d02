-- The email's laid-out width when it overflowed the client's window (issue 29): the picture is cut
-- at the window's edge, and the pages say so. NULL when it fitted, or before this was recorded.
ALTER TABLE render_jobs ADD COLUMN overflow_width INTEGER;
