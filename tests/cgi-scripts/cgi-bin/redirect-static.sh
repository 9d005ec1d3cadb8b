#!/bin/sh
# A local redirect to a static file of the site.
printf 'Location: /static.txt\n\n'
