INSERT INTO failing_domains (session_id, source, domain, requests, denied, errors, status_4xx,
    status_5xx, last_seen)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
