/*
 * unimplemented.c - the whole OpenAI surface answers honestly (issue 6 item
 * 8) and under its path aliases (item 9).
 *
 * OPS below is every method+path of the OpenAI API spec (the 288 rows of
 * ../shared/specs/openai-paths.tsv, the seven "?beta=true" rows folded into
 * their plain paths since the router ignores the query), with the spec's
 * operationId. From it this file builds:
 *   - a route table of HTTP_ROUTE_FALLBACK routes "/v1" + path answering
 *     501 {"error":{message, type:"server_error", param:null,
 *     code:"not_implemented_local"}} with x-should-retry: false. The router
 *     chooses a fallback only when no ordinary route matches path and
 *     method, so the table lists implemented operations too: a real route,
 *     registered in any table at any time, shadows its 501 without an edit
 *     here (docs/openai.md, "The whole surface").
 *   - the path aliases: for each first segment S of the table ("chat",
 *     "models", "audio", ...) "/S" and "/v1/v1/S" are routed as "/v1/S", so
 *     every OpenAI route, implemented or 501, answers without the /v1 prefix
 *     and with a doubled one. Aliases apply only to paths no route matches
 *     directly, so Ollama's /api/... and the admin routes are never touched.
 * The table is source, never read from ../shared at run time.
 */
#include "api/openai/unimplemented.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/anthropic/anthropic.h"
#include "api/api.h"
#include "base/err.h"
#include "base/util.h"

static const openai_op OPS[] = {
    {"GET", "/assistants", "listAssistants"},
    {"POST", "/assistants", "createAssistant"},
    {"GET", "/assistants/{assistant_id}", "getAssistant"},
    {"POST", "/assistants/{assistant_id}", "modifyAssistant"},
    {"DELETE", "/assistants/{assistant_id}", "deleteAssistant"},
    {"POST", "/audio/speech", "createSpeech"},
    {"POST", "/audio/transcriptions", "createTranscription"},
    {"POST", "/audio/translations", "createTranslation"},
    {"GET", "/audio/voice_consents", "listVoiceConsents"},
    {"POST", "/audio/voice_consents", "createVoiceConsent"},
    {"GET", "/audio/voice_consents/{consent_id}", "getVoiceConsent"},
    {"POST", "/audio/voice_consents/{consent_id}", "updateVoiceConsent"},
    {"DELETE", "/audio/voice_consents/{consent_id}", "deleteVoiceConsent"},
    {"POST", "/audio/voices", "createVoice"},
    {"GET", "/batches", "listBatches"},
    {"POST", "/batches", "createBatch"},
    {"GET", "/batches/{batch_id}", "retrieveBatch"},
    {"POST", "/batches/{batch_id}/cancel", "cancelBatch"},
    {"GET", "/chat/completions", "listChatCompletions"},
    {"POST", "/chat/completions", "createChatCompletion"},
    {"GET", "/chat/completions/{completion_id}", "getChatCompletion"},
    {"POST", "/chat/completions/{completion_id}", "updateChatCompletion"},
    {"DELETE", "/chat/completions/{completion_id}", "deleteChatCompletion"},
    {"GET", "/chat/completions/{completion_id}/messages", "getChatCompletionMessages"},
    {"POST", "/chatkit/sessions", "CreateChatSessionMethod"},
    {"POST", "/chatkit/sessions/{session_id}/cancel", "CancelChatSessionMethod"},
    {"GET", "/chatkit/threads", "ListThreadsMethod"},
    {"GET", "/chatkit/threads/{thread_id}", "GetThreadMethod"},
    {"DELETE", "/chatkit/threads/{thread_id}", "DeleteThreadMethod"},
    {"GET", "/chatkit/threads/{thread_id}/items", "ListThreadItemsMethod"},
    {"POST", "/completions", "createCompletion"},
    {"GET", "/containers", "ListContainers"},
    {"POST", "/containers", "CreateContainer"},
    {"GET", "/containers/{container_id}", "RetrieveContainer"},
    {"DELETE", "/containers/{container_id}", "DeleteContainer"},
    {"GET", "/containers/{container_id}/files", "ListContainerFiles"},
    {"POST", "/containers/{container_id}/files", "CreateContainerFile"},
    {"GET", "/containers/{container_id}/files/{file_id}", "RetrieveContainerFile"},
    {"DELETE", "/containers/{container_id}/files/{file_id}", "DeleteContainerFile"},
    {"GET", "/containers/{container_id}/files/{file_id}/content", "RetrieveContainerFileContent"},
    {"POST", "/content_provenance_checks", "Createcontentprovenancecheck"},
    {"POST", "/conversations", "createConversation"},
    {"GET", "/conversations/{conversation_id}", "getConversation"},
    {"POST", "/conversations/{conversation_id}", "updateConversation"},
    {"DELETE", "/conversations/{conversation_id}", "deleteConversation"},
    {"GET", "/conversations/{conversation_id}/items", "listConversationItems"},
    {"POST", "/conversations/{conversation_id}/items", "createConversationItems"},
    {"GET", "/conversations/{conversation_id}/items/{item_id}", "getConversationItem"},
    {"DELETE", "/conversations/{conversation_id}/items/{item_id}", "deleteConversationItem"},
    {"POST", "/embeddings", "createEmbedding"},
    {"GET", "/evals", "listEvals"},
    {"POST", "/evals", "createEval"},
    {"GET", "/evals/{eval_id}", "getEval"},
    {"POST", "/evals/{eval_id}", "updateEval"},
    {"DELETE", "/evals/{eval_id}", "deleteEval"},
    {"GET", "/evals/{eval_id}/runs", "getEvalRuns"},
    {"POST", "/evals/{eval_id}/runs", "createEvalRun"},
    {"GET", "/evals/{eval_id}/runs/{run_id}", "getEvalRun"},
    {"POST", "/evals/{eval_id}/runs/{run_id}", "cancelEvalRun"},
    {"DELETE", "/evals/{eval_id}/runs/{run_id}", "deleteEvalRun"},
    {"GET", "/evals/{eval_id}/runs/{run_id}/output_items", "getEvalRunOutputItems"},
    {"GET", "/evals/{eval_id}/runs/{run_id}/output_items/{output_item_id}", "getEvalRunOutputItem"},
    {"GET", "/files", "listFiles"},
    {"POST", "/files", "createFile"},
    {"GET", "/files/{file_id}", "retrieveFile"},
    {"DELETE", "/files/{file_id}", "deleteFile"},
    {"GET", "/files/{file_id}/content", "downloadFile"},
    {"POST", "/fine_tuning/alpha/graders/run", "runGrader"},
    {"POST", "/fine_tuning/alpha/graders/validate", "validateGrader"},
    {"GET", "/fine_tuning/checkpoints/{fine_tuned_model_checkpoint}/permissions", "listFineTuningCheckpointPermissions"},
    {"POST", "/fine_tuning/checkpoints/{fine_tuned_model_checkpoint}/permissions", "createFineTuningCheckpointPermission"},
    {"DELETE", "/fine_tuning/checkpoints/{fine_tuned_model_checkpoint}/permissions/{permission_id}", "deleteFineTuningCheckpointPermission"},
    {"GET", "/fine_tuning/jobs", "listPaginatedFineTuningJobs"},
    {"POST", "/fine_tuning/jobs", "createFineTuningJob"},
    {"GET", "/fine_tuning/jobs/{fine_tuning_job_id}", "retrieveFineTuningJob"},
    {"POST", "/fine_tuning/jobs/{fine_tuning_job_id}/cancel", "cancelFineTuningJob"},
    {"GET", "/fine_tuning/jobs/{fine_tuning_job_id}/checkpoints", "listFineTuningJobCheckpoints"},
    {"GET", "/fine_tuning/jobs/{fine_tuning_job_id}/events", "listFineTuningEvents"},
    {"POST", "/fine_tuning/jobs/{fine_tuning_job_id}/pause", "pauseFineTuningJob"},
    {"POST", "/fine_tuning/jobs/{fine_tuning_job_id}/resume", "resumeFineTuningJob"},
    {"POST", "/images/edits", "createImageEdit"},
    {"POST", "/images/generations", "createImage"},
    {"POST", "/images/variations", "createImageVariation"},
    {"GET", "/models", "listModels"},
    {"GET", "/models/{model}", "retrieveModel"},
    {"DELETE", "/models/{model}", "deleteModel"},
    {"POST", "/moderations", "createModeration"},
    {"GET", "/organization/admin_api_keys", "admin-api-keys-list"},
    {"POST", "/organization/admin_api_keys", "admin-api-keys-create"},
    {"GET", "/organization/admin_api_keys/{key_id}", "admin-api-keys-get"},
    {"DELETE", "/organization/admin_api_keys/{key_id}", "admin-api-keys-delete"},
    {"GET", "/organization/audit_logs", "list-audit-logs"},
    {"GET", "/organization/certificates", "listOrganizationCertificates"},
    {"POST", "/organization/certificates", "uploadCertificate"},
    {"POST", "/organization/certificates/activate", "activateOrganizationCertificates"},
    {"POST", "/organization/certificates/deactivate", "deactivateOrganizationCertificates"},
    {"GET", "/organization/certificates/{certificate_id}", "getCertificate"},
    {"POST", "/organization/certificates/{certificate_id}", "modifyCertificate"},
    {"DELETE", "/organization/certificates/{certificate_id}", "deleteCertificate"},
    {"GET", "/organization/costs", "usage-costs"},
    {"GET", "/organization/data_retention", "retrieve-organization-data-retention"},
    {"POST", "/organization/data_retention", "update-organization-data-retention"},
    {"GET", "/organization/groups", "list-groups"},
    {"POST", "/organization/groups", "create-group"},
    {"GET", "/organization/groups/{group_id}", "retrieve-group"},
    {"POST", "/organization/groups/{group_id}", "update-group"},
    {"DELETE", "/organization/groups/{group_id}", "delete-group"},
    {"GET", "/organization/groups/{group_id}/roles", "list-group-role-assignments"},
    {"POST", "/organization/groups/{group_id}/roles", "assign-group-role"},
    {"GET", "/organization/groups/{group_id}/roles/{role_id}", "retrieve-group-role"},
    {"DELETE", "/organization/groups/{group_id}/roles/{role_id}", "unassign-group-role"},
    {"GET", "/organization/groups/{group_id}/users", "list-group-users"},
    {"POST", "/organization/groups/{group_id}/users", "add-group-user"},
    {"GET", "/organization/groups/{group_id}/users/{user_id}", "retrieve-group-user"},
    {"DELETE", "/organization/groups/{group_id}/users/{user_id}", "remove-group-user"},
    {"GET", "/organization/invites", "list-invites"},
    {"POST", "/organization/invites", "inviteUser"},
    {"GET", "/organization/invites/{invite_id}", "retrieve-invite"},
    {"DELETE", "/organization/invites/{invite_id}", "delete-invite"},
    {"GET", "/organization/projects", "list-projects"},
    {"POST", "/organization/projects", "create-project"},
    {"GET", "/organization/projects/{project_id}", "retrieve-project"},
    {"POST", "/organization/projects/{project_id}", "modify-project"},
    {"GET", "/organization/projects/{project_id}/api_keys", "list-project-api-keys"},
    {"GET", "/organization/projects/{project_id}/api_keys/{api_key_id}", "retrieve-project-api-key"},
    {"DELETE", "/organization/projects/{project_id}/api_keys/{api_key_id}", "delete-project-api-key"},
    {"POST", "/organization/projects/{project_id}/archive", "archive-project"},
    {"GET", "/organization/projects/{project_id}/certificates", "listProjectCertificates"},
    {"POST", "/organization/projects/{project_id}/certificates/activate", "activateProjectCertificates"},
    {"POST", "/organization/projects/{project_id}/certificates/deactivate", "deactivateProjectCertificates"},
    {"GET", "/organization/projects/{project_id}/data_retention", "retrieve-project-data-retention"},
    {"POST", "/organization/projects/{project_id}/data_retention", "update-project-data-retention"},
    {"GET", "/organization/projects/{project_id}/groups", "list-project-groups"},
    {"POST", "/organization/projects/{project_id}/groups", "add-project-group"},
    {"GET", "/organization/projects/{project_id}/groups/{group_id}", "retrieve-project-group"},
    {"DELETE", "/organization/projects/{project_id}/groups/{group_id}", "remove-project-group"},
    {"GET", "/organization/projects/{project_id}/hosted_tool_permissions", "retrieve-project-hosted-tool-permissions"},
    {"POST", "/organization/projects/{project_id}/hosted_tool_permissions", "update-project-hosted-tool-permissions"},
    {"GET", "/organization/projects/{project_id}/model_permissions", "retrieve-project-model-permissions"},
    {"POST", "/organization/projects/{project_id}/model_permissions", "update-project-model-permissions"},
    {"DELETE", "/organization/projects/{project_id}/model_permissions", "delete-project-model-permissions"},
    {"GET", "/organization/projects/{project_id}/rate_limits", "list-project-rate-limits"},
    {"POST", "/organization/projects/{project_id}/rate_limits/{rate_limit_id}", "update-project-rate-limits"},
    {"GET", "/organization/projects/{project_id}/service_accounts", "list-project-service-accounts"},
    {"POST", "/organization/projects/{project_id}/service_accounts", "create-project-service-account"},
    {"GET", "/organization/projects/{project_id}/service_accounts/{service_account_id}", "retrieve-project-service-account"},
    {"POST", "/organization/projects/{project_id}/service_accounts/{service_account_id}", "update-project-service-account"},
    {"DELETE", "/organization/projects/{project_id}/service_accounts/{service_account_id}", "delete-project-service-account"},
    {"POST", "/organization/projects/{project_id}/service_accounts/{service_account_id}/api_keys", "CreateanAPIkeyforaserviceaccount"},
    {"GET", "/organization/projects/{project_id}/spend_alerts", "list-project-spend-alerts"},
    {"POST", "/organization/projects/{project_id}/spend_alerts", "create-project-spend-alert"},
    {"GET", "/organization/projects/{project_id}/spend_alerts/{alert_id}", "retrieve-project-spend-alert"},
    {"POST", "/organization/projects/{project_id}/spend_alerts/{alert_id}", "update-project-spend-alert"},
    {"DELETE", "/organization/projects/{project_id}/spend_alerts/{alert_id}", "delete-project-spend-alert"},
    {"GET", "/organization/projects/{project_id}/spend_limit", "Getprojectspendlimit"},
    {"POST", "/organization/projects/{project_id}/spend_limit", "Updateprojectspendlimit"},
    {"DELETE", "/organization/projects/{project_id}/spend_limit", "Deleteprojectspendlimit"},
    {"GET", "/organization/projects/{project_id}/users", "list-project-users"},
    {"POST", "/organization/projects/{project_id}/users", "create-project-user"},
    {"GET", "/organization/projects/{project_id}/users/{user_id}", "retrieve-project-user"},
    {"POST", "/organization/projects/{project_id}/users/{user_id}", "modify-project-user"},
    {"DELETE", "/organization/projects/{project_id}/users/{user_id}", "delete-project-user"},
    {"GET", "/organization/roles", "list-roles"},
    {"POST", "/organization/roles", "create-role"},
    {"GET", "/organization/roles/{role_id}", "retrieve-role"},
    {"POST", "/organization/roles/{role_id}", "update-role"},
    {"DELETE", "/organization/roles/{role_id}", "delete-role"},
    {"GET", "/organization/spend_alerts", "list-organization-spend-alerts"},
    {"POST", "/organization/spend_alerts", "create-organization-spend-alert"},
    {"GET", "/organization/spend_alerts/{alert_id}", "retrieve-organization-spend-alert"},
    {"POST", "/organization/spend_alerts/{alert_id}", "update-organization-spend-alert"},
    {"DELETE", "/organization/spend_alerts/{alert_id}", "delete-organization-spend-alert"},
    {"GET", "/organization/spend_limit", "Getorganizationspendlimit"},
    {"POST", "/organization/spend_limit", "Updateorganizationspendlimit"},
    {"DELETE", "/organization/spend_limit", "Deleteorganizationspendlimit"},
    {"GET", "/organization/usage/audio_speeches", "usage-audio-speeches"},
    {"GET", "/organization/usage/audio_transcriptions", "usage-audio-transcriptions"},
    {"GET", "/organization/usage/code_interpreter_sessions", "usage-code-interpreter-sessions"},
    {"GET", "/organization/usage/completions", "usage-completions"},
    {"GET", "/organization/usage/embeddings", "usage-embeddings"},
    {"GET", "/organization/usage/file_search_calls", "usage-file-search-calls"},
    {"GET", "/organization/usage/images", "usage-images"},
    {"GET", "/organization/usage/moderations", "usage-moderations"},
    {"GET", "/organization/usage/vector_stores", "usage-vector-stores"},
    {"GET", "/organization/usage/web_search_calls", "usage-web-search-calls"},
    {"GET", "/organization/users", "list-users"},
    {"GET", "/organization/users/{user_id}", "retrieve-user"},
    {"POST", "/organization/users/{user_id}", "modify-user"},
    {"DELETE", "/organization/users/{user_id}", "delete-user"},
    {"GET", "/organization/users/{user_id}/roles", "list-user-role-assignments"},
    {"POST", "/organization/users/{user_id}/roles", "assign-user-role"},
    {"GET", "/organization/users/{user_id}/roles/{role_id}", "retrieve-user-role"},
    {"DELETE", "/organization/users/{user_id}/roles/{role_id}", "unassign-user-role"},
    {"GET", "/projects/{project_id}/groups/{group_id}/roles", "list-project-group-role-assignments"},
    {"POST", "/projects/{project_id}/groups/{group_id}/roles", "assign-project-group-role"},
    {"GET", "/projects/{project_id}/groups/{group_id}/roles/{role_id}", "retrieve-project-group-role"},
    {"DELETE", "/projects/{project_id}/groups/{group_id}/roles/{role_id}", "unassign-project-group-role"},
    {"GET", "/projects/{project_id}/roles", "list-project-roles"},
    {"POST", "/projects/{project_id}/roles", "create-project-role"},
    {"GET", "/projects/{project_id}/roles/{role_id}", "retrieve-project-role"},
    {"POST", "/projects/{project_id}/roles/{role_id}", "update-project-role"},
    {"DELETE", "/projects/{project_id}/roles/{role_id}", "delete-project-role"},
    {"GET", "/projects/{project_id}/users/{user_id}/roles", "list-project-user-role-assignments"},
    {"POST", "/projects/{project_id}/users/{user_id}/roles", "assign-project-user-role"},
    {"GET", "/projects/{project_id}/users/{user_id}/roles/{role_id}", "retrieve-project-user-role"},
    {"DELETE", "/projects/{project_id}/users/{user_id}/roles/{role_id}", "unassign-project-user-role"},
    {"POST", "/realtime/calls", "create-realtime-call"},
    {"POST", "/realtime/calls/{call_id}/accept", "accept-realtime-call"},
    {"POST", "/realtime/calls/{call_id}/hangup", "hangup-realtime-call"},
    {"POST", "/realtime/calls/{call_id}/refer", "refer-realtime-call"},
    {"POST", "/realtime/calls/{call_id}/reject", "reject-realtime-call"},
    {"POST", "/realtime/client_secrets", "create-realtime-client-secret"},
    {"POST", "/realtime/sessions", "create-realtime-session"},
    {"POST", "/realtime/transcription_sessions", "create-realtime-transcription-session"},
    {"POST", "/realtime/translations/client_secrets", "create-realtime-translation-client-secret"},
    {"POST", "/responses", "createResponse"},
    {"POST", "/responses/compact", "Compactconversation"},
    {"POST", "/responses/input_tokens", "Getinputtokencounts"},
    {"GET", "/responses/{response_id}", "getResponse"},
    {"DELETE", "/responses/{response_id}", "deleteResponse"},
    {"POST", "/responses/{response_id}/cancel", "cancelResponse"},
    {"GET", "/responses/{response_id}/input_items", "listInputItems"},
    {"GET", "/skills", "ListSkills"},
    {"POST", "/skills", "CreateSkill"},
    {"GET", "/skills/{skill_id}", "GetSkill"},
    {"POST", "/skills/{skill_id}", "UpdateSkillDefaultVersion"},
    {"DELETE", "/skills/{skill_id}", "DeleteSkill"},
    {"GET", "/skills/{skill_id}/content", "GetSkillContent"},
    {"GET", "/skills/{skill_id}/versions", "ListSkillVersions"},
    {"POST", "/skills/{skill_id}/versions", "CreateSkillVersion"},
    {"GET", "/skills/{skill_id}/versions/{version}", "GetSkillVersion"},
    {"DELETE", "/skills/{skill_id}/versions/{version}", "DeleteSkillVersion"},
    {"GET", "/skills/{skill_id}/versions/{version}/content", "GetSkillVersionContent"},
    {"POST", "/threads", "createThread"},
    {"POST", "/threads/runs", "createThreadAndRun"},
    {"GET", "/threads/{thread_id}", "getThread"},
    {"POST", "/threads/{thread_id}", "modifyThread"},
    {"DELETE", "/threads/{thread_id}", "deleteThread"},
    {"GET", "/threads/{thread_id}/messages", "listMessages"},
    {"POST", "/threads/{thread_id}/messages", "createMessage"},
    {"GET", "/threads/{thread_id}/messages/{message_id}", "getMessage"},
    {"POST", "/threads/{thread_id}/messages/{message_id}", "modifyMessage"},
    {"DELETE", "/threads/{thread_id}/messages/{message_id}", "deleteMessage"},
    {"GET", "/threads/{thread_id}/runs", "listRuns"},
    {"POST", "/threads/{thread_id}/runs", "createRun"},
    {"GET", "/threads/{thread_id}/runs/{run_id}", "getRun"},
    {"POST", "/threads/{thread_id}/runs/{run_id}", "modifyRun"},
    {"POST", "/threads/{thread_id}/runs/{run_id}/cancel", "cancelRun"},
    {"GET", "/threads/{thread_id}/runs/{run_id}/steps", "listRunSteps"},
    {"GET", "/threads/{thread_id}/runs/{run_id}/steps/{step_id}", "getRunStep"},
    {"POST", "/threads/{thread_id}/runs/{run_id}/submit_tool_outputs", "submitToolOuputsToRun"},
    {"POST", "/uploads", "createUpload"},
    {"POST", "/uploads/{upload_id}/cancel", "cancelUpload"},
    {"POST", "/uploads/{upload_id}/complete", "completeUpload"},
    {"POST", "/uploads/{upload_id}/parts", "addUploadPart"},
    {"GET", "/vector_stores", "listVectorStores"},
    {"POST", "/vector_stores", "createVectorStore"},
    {"GET", "/vector_stores/{vector_store_id}", "getVectorStore"},
    {"POST", "/vector_stores/{vector_store_id}", "modifyVectorStore"},
    {"DELETE", "/vector_stores/{vector_store_id}", "deleteVectorStore"},
    {"POST", "/vector_stores/{vector_store_id}/file_batches", "createVectorStoreFileBatch"},
    {"GET", "/vector_stores/{vector_store_id}/file_batches/{batch_id}", "getVectorStoreFileBatch"},
    {"POST", "/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel", "cancelVectorStoreFileBatch"},
    {"GET", "/vector_stores/{vector_store_id}/file_batches/{batch_id}/files", "listFilesInVectorStoreBatch"},
    {"GET", "/vector_stores/{vector_store_id}/files", "listVectorStoreFiles"},
    {"POST", "/vector_stores/{vector_store_id}/files", "createVectorStoreFile"},
    {"GET", "/vector_stores/{vector_store_id}/files/{file_id}", "getVectorStoreFile"},
    {"POST", "/vector_stores/{vector_store_id}/files/{file_id}", "updateVectorStoreFileAttributes"},
    {"DELETE", "/vector_stores/{vector_store_id}/files/{file_id}", "deleteVectorStoreFile"},
    {"GET", "/vector_stores/{vector_store_id}/files/{file_id}/content", "retrieveVectorStoreFileContent"},
    {"POST", "/vector_stores/{vector_store_id}/search", "searchVectorStore"},
    {"GET", "/videos", "ListVideos"},
    {"POST", "/videos", "createVideo"},
    {"POST", "/videos/characters", "CreateVideoCharacter"},
    {"GET", "/videos/characters/{character_id}", "GetVideoCharacter"},
    {"POST", "/videos/edits", "CreateVideoEdit"},
    {"POST", "/videos/extensions", "CreateVideoExtend"},
    {"GET", "/videos/{video_id}", "GetVideo"},
    {"DELETE", "/videos/{video_id}", "DeleteVideo"},
    {"GET", "/videos/{video_id}/content", "RetrieveVideoContent"},
    {"POST", "/videos/{video_id}/remix", "CreateVideoRemix"},
};

#define PATTERN_MAX 128
#define MAX_PREFIXES 64

static http_route g_routes[ARRAY_LEN(OPS)];
static char g_patterns[ARRAY_LEN(OPS)][PATTERN_MAX];
static char g_prefixes[MAX_PREFIXES][48];
static const char *g_prefix_ptrs[MAX_PREFIXES];
static size_t g_n_prefixes;
static int g_init_rc;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

size_t openai_ops(const openai_op **out) {
  *out = OPS;
  return ARRAY_LEN(OPS);
}

/* Answers 501 naming the operation of the route (its ctx). */
static void not_implemented(http_req *req, void *ctx) {
  const openai_op *op = ctx;
  char msg[512];
  snprintf(msg, sizeof msg,
           "%s (%s /v1%s) is an OpenAI cloud feature with no local equivalent in parley yet, so this server "
           "does not implement it; retrying will not help.",
           op->operation, op->method, op->path);
  /* An Anthropic client (anthropic-version header) on a shared /v1 path
   * gets its own dialect's error shape (and, on a path that is Anthropic's
   * too, its own wording); everyone else the OpenAI one. */
  if (anthropic_cloud_answer(req)) return;
  if (api_dialect_of(req) != API_DIALECT_OPENAI) {
    api_error(req, 501, ERR_UNSUPPORTED, msg, NULL);
    return;
  }
  json_t *body = json_pack("{s:{s:s, s:s, s:n, s:s}}", "error", "message", msg, "type", "server_error", "param",
                           "code", OPENAI_NOT_IMPLEMENTED_CODE);
  http_resp_header(req, "x-should-retry", "false");
  if (!body) {
    api_error(req, 500, ERR_NOMEM, "out of memory", NULL);
    return;
  }
  api_respond_json(req, 501, body);
  json_decref(body);
}

static void build(void) {
  for (size_t i = 0; i < ARRAY_LEN(OPS); i++) {
    int n = snprintf(g_patterns[i], PATTERN_MAX, "/v1%s", OPS[i].path);
    if (n < 0 || n >= PATTERN_MAX) {
      g_init_rc = err_set(ERR_INVALID, "OpenAI path %s is longer than %d bytes", OPS[i].path, PATTERN_MAX - 4);
      return;
    }
    g_routes[i] = (http_route){OPS[i].method, g_patterns[i], not_implemented, (void *)&OPS[i],
                               HTTP_ROUTE_FALLBACK | HTTP_BODY_IGNORE, OPS[i].operation};
    /* The first segment, once. */
    const char *seg = OPS[i].path + 1;
    size_t len = strcspn(seg, "/");
    bool seen = false;
    for (size_t j = 0; j < g_n_prefixes && !seen; j++)
      seen = strlen(g_prefixes[j]) == len + 1 && memcmp(g_prefixes[j] + 1, seg, len) == 0;
    if (seen) continue;
    if (g_n_prefixes == MAX_PREFIXES || len + 2 > sizeof g_prefixes[0]) {
      g_init_rc = err_set(ERR_INVALID, "too many or too long OpenAI path prefixes at %s", OPS[i].path);
      return;
    }
    snprintf(g_prefixes[g_n_prefixes], sizeof g_prefixes[0], "/%.*s", (int)len, seg);
    g_prefix_ptrs[g_n_prefixes] = g_prefixes[g_n_prefixes];
    g_n_prefixes++;
  }
}

size_t openai_unimplemented_routes(const http_route **out) {
  pthread_once(&g_once, build);
  *out = g_routes;
  return g_init_rc ? 0 : ARRAY_LEN(OPS);
}

size_t openai_path_prefixes(const char *const **out) {
  pthread_once(&g_once, build);
  *out = g_prefix_ptrs;
  return g_init_rc ? 0 : g_n_prefixes;
}

int openai_surface_install(http_server *srv) {
  const http_route *routes;
  size_t n = openai_unimplemented_routes(&routes);
  if (g_init_rc) return g_init_rc;
  int rc = http_server_add_routes(srv, routes, n);
  const char *const *prefixes;
  size_t np = openai_path_prefixes(&prefixes);
  for (size_t i = 0; !rc && i < np; i++) {
    char v1[64], v1v1[64];
    snprintf(v1, sizeof v1, "/v1%s", prefixes[i]);
    snprintf(v1v1, sizeof v1v1, "/v1/v1%s", prefixes[i]);
    rc = http_server_add_alias(srv, prefixes[i], v1);
    if (!rc) rc = http_server_add_alias(srv, v1v1, v1);
  }
  return rc;
}
