-- SPDX-License-Identifier: MIT
-- pipeline.lua: wrk script that pipelines requests 16 deep (wrk's standard
-- pipeline example).  Every request() call returns 16 copies of the request
-- wrk would send anyway (method, path and headers from the URL and flags wrk
-- was given), written in one go; wrk counts each response.  The depth can be
-- changed with a script argument: wrk ... -s pipeline.lua URL -- 32

init = function(args)
   local depth = tonumber(args[1]) or 16
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format()
   end
   req = table.concat(r)
end

request = function()
   return req
end
