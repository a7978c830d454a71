-- A net_events row that is a model API request as Capsem recognises one (spec §6.2 #13;
-- Capsem's mitm_proxy/util.rs is_llm_api_path): a provider domain and an LLM endpoint path.
-- OAuth refreshes (oauth2.googleapis.com/token), client telemetry (play.googleapis.com) and
-- uploads (/upload/...) reach provider domains too, and are ordinary traffic.
(
    (domain LIKE '%.anthropic.com'
        AND (path LIKE '/v1/messages%' OR path LIKE '/v1/complete%'))
    OR (domain LIKE '%.openai.com'
        AND (path LIKE '/v1/chat/completions%' OR path LIKE '/v1/responses%'
             OR path LIKE '/v1/completions%' OR path LIKE '/v1/embeddings%'
             OR path LIKE '/v1/images%' OR path LIKE '/v1/audio%'))
    OR (domain LIKE '%.googleapis.com'
        AND (path LIKE '%:generateContent%' OR path LIKE '%:streamGenerateContent%'
             OR path LIKE '%:embedContent%' OR path LIKE '%:batchEmbedContents%'))
)
