-- The images and stylesheets a screenshot's page could not load (issue 29), per render job (one
-- screenshot variant): JSON array of domain::FailedResource, written when the job is done, NULL
-- before and after a reprocess.
ALTER TABLE render_jobs ADD COLUMN failed_resources TEXT;
