package upstream

import (
	"context"
	"fmt"
	"github.com/toolgate/toolgate/packs/mangrove/upstream/api"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Candidate is api.Candidate, the wire type clients read.
type Candidate = api.Candidate

// maxCandidates bounds the candidates an unknown article id gets.
const maxCandidates = 5

// candidates lists the articles a mistyped or guessed id may stand for:
// those whose number shares the most leading digits with it, widened until
// there is a choice (two at least), else the first few of the catalogue.
func (s *Server) candidates(ctx context.Context, article int64) ([]Candidate, error) {
	digits := strconv.FormatInt(article, 10)
	var best []Candidate
	for n := len(digits); n >= 2; n-- {
		rows, err := s.Pool.Query(ctx, `SELECT article_id, name FROM mangrove.articles WHERE article_id::text LIKE $1 || '%' ORDER BY article_id LIMIT $2`,
			digits[:n], maxCandidates)
		if err != nil {
			return nil, err
		}
		found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Candidate])
		if err != nil {
			return nil, err
		}
		if len(found) >= 2 {
			return found, nil
		}
		if len(found) > len(best) {
			best = found
		}
	}
	if len(best) > 0 {
		return best, nil
	}
	rows, err := s.Pool.Query(ctx, `SELECT article_id, name FROM mangrove.articles ORDER BY article_id LIMIT $1`, maxCandidates)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Candidate])
}

// unknownArticle answers 404 naming the articles the person may have meant,
// so the model asks them instead of guessing again.
func (s *Server) unknownArticle(w http.ResponseWriter, r *http.Request, article int64) {
	found, err := s.candidates(r.Context(), article)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	names := make([]string, len(found))
	for i, c := range found {
		names[i] = fmt.Sprintf("%d %s", c.ArticleID, c.Name)
	}
	writeJSON(w, http.StatusNotFound, Error{Code: "unknown_article", Candidates: found,
		Message: fmt.Sprintf("article %d is not in Mangrove's catalogue; ask the person which one they mean (%s) and call again with that articleId",
			article, strings.Join(names, "; "))})
}
